"""The signal table of market.data.signals: a researcher's own numbers per ticker and date (an
analyst rating, a factor score, another model's forecast) that a prompt shows under their
names (market.states.signals), each as of the decision date: the latest value dated on or before
it, never a later one.

Two shapes are read: long (date, ticker, name, value: a row per value) or wide (date,
ticker and a numeric column per signal, such as the price file's own extra columns; only
the columns market.states.signals names are read). Read by build_states (through the market's
``states.tables``), by the leakage audit, which re-derives every shown value from this file
with a DuckDB ASOF JOIN of its own, and by the preflight, so that a missing or
non-numeric value stops the run before any job.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import files

LONG = ("date", "ticker", "name", "value")


def _columns(path: str) -> tuple[pd.DataFrame, str, str, pd.DataFrame | None, list[str]]:
    """The raw table, its date and ticker columns, the long frame (None for a wide file) and
    the signals it holds, in file order."""
    raw = files.read_table(path, "signal file", "market.data.signals")
    from hitchhiker.environments.market.prices import DATE_NAMES, TICKER_NAMES  # here: a data-step module

    raw.columns = [str(c).strip() for c in raw.columns]
    lower = {c.lower(): c for c in raw.columns}
    date = next((lower[n] for n in DATE_NAMES if n in lower), None)  # the price file's spellings
    ticker = next((lower[n] for n in TICKER_NAMES if n in lower), None)
    if date is None or ticker is None:
        kind, spellings = ("date", DATE_NAMES) if date is None else ("ticker", TICKER_NAMES)
        raise HitchhikerError(f"signal file {path}: no {kind} column (named one of {', '.join(spellings)})")
    if {"name", "value"} <= set(lower):  # long
        frame = raw.rename(columns={date: "date", ticker: "ticker", lower["name"]: "name", lower["value"]: "value"})
        frame = frame[list(LONG)]
        frame["name"] = frame["name"].astype(str).str.strip()
        return raw, date, ticker, frame, list(dict.fromkeys(frame["name"]))
    return raw, date, ticker, None, [c for c in raw.columns if c not in (date, ticker)]  # wide: a column each


def names(path: str) -> list[str]:
    """The signals file ``path`` holds, in file order (of a wide file, its numeric columns):
    what a prompt shows when market.states.signals is not given."""
    raw, _, _, frame, present = _columns(path)
    return present if frame is not None else [c for c in present if pd.api.types.is_numeric_dtype(raw[c])]


def read(path: str, names: list[str]) -> pd.DataFrame:
    """The values of signals ``names`` in file ``path``, long: date, ticker, name, value (float)."""
    from hitchhiker.environments.market.prices import read_close_dates  # here: a data-step module

    raw, date, ticker, frame, present = _columns(path)
    absent = [n for n in names if n not in present]
    if absent:
        have = ", ".join(sorted(present)[:8]) + (" ..." if len(present) > 8 else "")
        raise HitchhikerError(
            f"config key market.states.signals: {absent[0]!r} is not a signal of {path} (it has: {have})"
        )
    if frame is None:
        frame = raw.melt(id_vars=[date, ticker], value_vars=names, var_name="name")
        frame.columns = list(LONG)
    frame = frame[frame["name"].isin(names)].reset_index(drop=True)
    value = pd.to_numeric(frame["value"], errors="coerce")
    bad = value.isna() | ~np.isfinite(value.to_numpy(dtype=float, na_value=np.nan))
    if bad.any():
        r = frame[bad].iloc[0]
        raise HitchhikerError(
            f"signal file {path}: {r['name']} of {r['ticker']} on {r['date']} is {r['value']!r}, not a finite number"
        )
    return pd.DataFrame(
        {
            "date": read_close_dates(frame["date"], f"signal file {path}", "value").to_numpy(),
            "ticker": frame["ticker"].astype(str).str.strip(),
            "name": frame["name"],
            "value": value.astype(float),
        }
    )


def grid(table: pd.DataFrame, names: list[str], dates: pd.DatetimeIndex, tickers: list[str]) -> np.ndarray:
    """(dates, tickers, names): each signal's latest value dated on or before each date
    (NaN where there is none). A value dated between two price dates (a weekend rating)
    counts from the next one. Two values of one signal, ticker and date are refused."""
    dup = table.duplicated(["date", "ticker", "name"])
    if dup.any():
        r = table[dup].iloc[0]
        raise HitchhikerError(
            f"signal file: {r['name']} of {r['ticker']} has two values on {pd.Timestamp(r['date']).date()}"
        )
    out = np.full((len(dates), len(tickers), len(names)), np.nan)
    for j, name in enumerate(names):
        wide = table[table["name"] == name].pivot(index="date", columns="ticker", values="value")
        wide = wide.reindex(columns=tickers).sort_index()
        both = wide.index.union(dates)
        out[:, :, j] = wide.reindex(both).ffill().reindex(dates).to_numpy()
    return out


def check_known(values: np.ndarray, positions: np.ndarray, dates, tickers: list[str], names: list[str], split: str):
    """Every ticker has every signal as of each decision date (``positions`` in ``dates``)."""
    gap = np.isnan(values[positions])
    if gap.any():
        d, t, n = np.argwhere(gap)[0]
        raise HitchhikerError(
            f"market.data.signals: {names[n]} has no value for {tickers[t]} dated on or before "
            f"{pd.Timestamp(dates[positions[d]]).date()}, a decision date of the {split} split"
        )
