"""What every environment of dated decisions shares (the market's family and the weather):
reading a file's dates as written, whatever their form; each split's decision positions, an
embargo apart; the seeded draw of a split's max_states; and the audit of the splits' order."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from hitchhiker import cli

# dates written with names, tried after ISO: "Jan 4 2000", "January 4, 2000", "4 Jan 2000"
NAMED_DATES = ("%b %d %Y", "%b %d, %Y", "%B %d %Y", "%B %d, %Y", "%d %b %Y", "%d %B %Y", "%d-%b-%Y")


# a time of day and the zone after it: "2020-03-05 00:00:00+09:00", "2020-03-05T14:30Z"
TIME_AND_ZONE = r"(\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*(?:Z|UTC|[+-]\d{2}:?\d{2})$"


def read_times(values: pd.Series, origin: str) -> pd.Series:
    """A column of dates as timestamps on their own zone's clock, the time of day kept
    (``.dt.normalize()`` gives the days): ISO (YYYY-MM-DD, with or without a time or zone),
    numeric with slashes, dots or dashes (1/4/1999, 04.01.1999), or with month names.

    A date is the day as written, in the value's own zone: yfinance stamps an exchange's days
    at its local midnight, and a Tokyo or Frankfurt close of 5 March ("2020-03-05
    00:00:00+09:00") falls on 4 March in UTC, which would show it beside New York's 4 March.

    Numeric dates are read month first or day first as the whole column says: one value
    whose first number is above 12 makes it day first, one whose second is makes it month
    first. A column that neither settles (every number up to 12), or that says both, is
    refused: read either way, it would be wrong in silence. pandas' own inference decides
    from the first value only, so the order is settled here by hand.
    """
    if pd.api.types.is_datetime64_any_dtype(values):  # a Parquet's dates: already read (NaT if empty)
        dates = values
    else:
        dates = _parse_text(values.astype(str).str.strip(), origin)
    bad = dates.isna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise cli.HitchhikerError(
            f"{origin}: unreadable date {values.iloc[row]!r} in row {row + 1} "
            "(want YYYY-MM-DD, M/D/YYYY, D/M/YYYY or Jan 4 2000)"
        )
    dates = pd.to_datetime(dates)
    return dates.dt.tz_localize(None) if dates.dt.tz is not None else dates


def _parse_text(text: pd.Series, origin: str) -> pd.Series:
    """Dates from text in the one form that reads most of the column, NaT where it does not
    read: a typo among slashed dates is reported in its own row, not as the first date's."""
    best = pd.to_datetime(text.str.replace(TIME_AND_ZONE, r"\1", regex=True), format="ISO8601", errors="coerce")
    if best.notna().all():
        return best
    parts = text.str.extract(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})$").astype(float)
    numeric = parts.notna().all(axis=1)
    if numeric.sum() > best.notna().sum():
        first, second = parts[0] > 12, parts[1] > 12
        if first.any() and second.any():
            raise cli.HitchhikerError(
                f"{origin}: dates {text[first].iloc[0]!r} and {text[second].iloc[0]!r} put the day and the "
                "month in opposite orders; save them as YYYY-MM-DD"
            )
        if not first.any() and not second.any():
            raise cli.HitchhikerError(
                f"{origin}: dates such as {text[numeric].iloc[0]!r} read as month/day or as day/month, and no "
                "date in the column is past the 12th to settle which; save them as YYYY-MM-DD"
            )
        month, day = (parts[1], parts[0]) if first.any() else (parts[0], parts[1])
        best = pd.to_datetime(pd.DataFrame({"year": parts[2], "month": month, "day": day}), errors="coerce", utc=True)
    for fmt in NAMED_DATES:
        if best.notna().all():
            break
        named = pd.to_datetime(text, format=fmt, errors="coerce", utc=True)
        if named.notna().sum() > best.notna().sum():
            best = named
    return best


SPLITS = ("train", "validation", "test")


def embargo(states_cfg: dict) -> int:
    """Periods from a split's last decision date to the next one's first: states.embargo, else the horizon."""
    e = states_cfg.get("embargo")
    return states_cfg["horizon"] if e is None else e


def decision_days(dates, st: dict, history: int, ahead: int) -> dict[str, np.ndarray]:
    """Decision positions in ``dates`` of each configured split (states.<split>'s start and
    end), every states.stride-th, each with ``history`` positions before it and ``ahead``
    after it; walking back from the last split, each earlier one cut to end an embargo before
    the next one's first. A split may come back empty: the caller refuses it in its own
    data's words."""
    dates = pd.DatetimeIndex(dates)
    eligible = np.arange(history, len(dates) - ahead)
    out: dict[str, np.ndarray] = {}
    for split in SPLITS:
        if st.get(split) is None:
            continue
        lo, hi = pd.Timestamp(st[split]["start"]), pd.Timestamp(st[split]["end"])
        out[split] = eligible[(dates[eligible] >= lo) & (dates[eligible] <= hi)][:: st["stride"]]
    for nxt, prev in itertools.pairwise(reversed(list(out))):
        if len(out[nxt]):
            out[prev] = out[prev][out[prev] + embargo(st) <= out[nxt][0]]
    return out


def draw(days: dict[str, np.ndarray], st: dict, seed: int) -> dict[str, np.ndarray]:
    """Each split's positions, at most states.<split>.max_states of them: a seeded draw
    without replacement, in date order, the splits drawn in turn from one generator."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, d in days.items():
        cap = st[split].get("max_states")
        out[split] = np.sort(rng.choice(d, cap, replace=False)) if cap is not None and len(d) > cap else d
    return out


def splits_report(states: pd.DataFrame, outcome_dates, pos: np.ndarray, st: dict, period: str) -> dict:
    """The audit of the splits' order, independent of how they were drawn: consecutive splits
    must be an embargo apart and no outcome of an earlier one may reach the later one's first
    decision date; raises HitchhikerError naming both. Returns the report's part for
    audit.json: per pair of splits the last outcome and the periods between them, per split
    its first and last decision date. ``outcome_dates`` and ``pos`` (each decision date's
    position in the data table) follow the rows of ``states``; ``period`` is one row's word
    ("trading day")."""
    report = {}
    present = [sp for sp in SPLITS if (states.split == sp).any()]
    for earlier, later in itertools.pairwise(present):
        a, b = (states.split == earlier).to_numpy(), (states.split == later).to_numpy()
        gap = int(pos[b].min() - pos[a].max())
        reach = pd.Timestamp(np.asarray(outcome_dates)[a].max())
        first = pd.Timestamp(states.date[b].min())
        if gap < embargo(st) or reach > first:
            raise cli.HitchhikerError(
                f"leakage audit: {earlier} outcomes reach {reach.date()}, the {later} window starts "
                f"{first.date()} ({gap} {period}{'' if gap == 1 else 's'} apart, embargo {embargo(st)})"
            )
        report[f"{earlier}_to_{later}"] = {"last_outcome": str(reach.date()), "embargo_periods": gap}
    for split in present:
        d = states.date[states.split == split]
        report[f"{split}_dates"] = [str(d.min().date()), str(d.max().date())]
    return report
