"""The leakage audit of the market environments: every state re-made from the data up to its
decision date, compared byte for byte.

For each group of states of one format and one history length, the prompts are rendered
again from the closes (and volume, headlines and signals) of the periods ending at each
state's decision date T, with the same code that built them, and compared with the stored
prompts as strings; the structured ``shown_returns`` and the outcomes (the return from T to
T + horizon, dated T + horizon) are compared as arrays. The ``signal_<name>`` columns are derived a
second way, from the market.data.signals file by a DuckDB ASOF JOIN, so that a look-ahead in the
build's own as-of code would not be repeated here. A prompt that differs in any
character, for instance a value of T + 1 or a later headline, fails with one line naming
the state and what differs. Then consecutive splits must be an embargo apart, with no
outcome of the earlier split reaching the later one's first decision date.

Vectorised like the build (no Python loop per state): benchmarks/audit measures it in
states a minute.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker import frequency
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import dated
from hitchhiker.environments.market import lists, prompts, signals
from hitchhiker.environments.market import states as states_mod


def _first_difference(got: str, expect: str, freq: str, history_days: int, date: pd.Timestamp) -> str:
    """What differs between a stored prompt and the one its data gives, in words."""
    got_lines, want_lines = got.splitlines(), expect.splitlines()
    header = {v: k for k, v in prompts.headers(freq).items()}
    section = None
    for line, want in itertools.zip_longest(got_lines, want_lines, fillvalue=""):
        if line in header:
            section = header[line]
        elif line == prompts.NEWS:
            section = "news"
        if line == want:
            continue
        if section == "news" and line[:4].isdigit():
            if pd.Timestamp(line[:10]) > date:
                return f"headline dated after the decision date: {line}"
            return f"headline not among its tickers' latest up to the decision date: {line}"
        if section == "signals" and ": " in line:
            ticker = line.split(": ", 1)[0].split("(")[-1].rstrip(")")
            return (
                f"the {ticker} signals in the prompt are not their latest values dated on or before the decision date"
            )
        if section in header.values() and ": " in line:
            ticker = line.split(": ", 1)[0].split("(")[-1].rstrip(")")
            return (
                f"the {ticker} {section} in the prompt are not the {frequency.periods(freq, history_days)} "
                "ending at the decision date"
            )
        return f"the prompt is not the one its data up to the decision date gives (first difference: {line!r})"
    return "the prompt is not the one its data up to the decision date gives"


def fail(states: pd.DataFrame, row: int, what: str):
    """Raise the audit's one-line error naming state ``row`` of ``states``."""
    s = states.iloc[row]
    where = f"state {s.state_id} ({s.format} {', '.join(s.tickers)} on {pd.Timestamp(s.date).date()})"
    raise HitchhikerError(f"leakage audit: {where}: {what}")


def decision_positions(states: pd.DataFrame, dates: pd.DatetimeIndex) -> np.ndarray:
    """Each state's decision date's position in ``dates``; fails on a date that is not there."""
    pos = dates.get_indexer(pd.DatetimeIndex(states["date"]))
    if (pos < 0).any():
        fail(states, int(np.argmax(pos < 0)), "decision date is not a date of the prices")
    return pos


def audit(
    wide_closes: pd.DataFrame,
    volume: np.ndarray | None,
    signal_values: np.ndarray | None,
    states: pd.DataFrame,
    outcomes: pd.DataFrame,
    cfg: dict,
    news: pd.DataFrame | None = None,
) -> dict:
    """Re-make every state from the data up to its decision date; raise on the first violation.

    Returns the report audit.json holds: states checked, the data's frequency, the embargo
    between consecutive splits and each split's first and last decision date.
    """
    st = states_mod.options(cfg)
    h = st["horizon"]
    dates, closes = wide_closes.index, wide_closes.to_numpy()
    freq = frequency.detect(dates)
    states = states.reset_index(drop=True)
    pos = decision_positions(states, dates)
    tickers = pa.array(states["tickers"].map(list), pa.list_(pa.string()))
    k = pc.list_value_length(tickers).to_numpy(zero_copy_only=False)
    cols = wide_closes.columns.get_indexer(pc.list_flatten(tickers).to_numpy(zero_copy_only=False))
    if (cols < 0).any():
        row = int(np.searchsorted(np.cumsum(k), int(np.argmax(cols < 0)), side="right"))
        fail(states, row, "a ticker that is not in the prices")
    history = states["history_days"].to_numpy()
    if (pos - history < 0).any() or (pos + h >= len(dates)).any():
        fail(
            states,
            int(np.argmax((pos - history < 0) | (pos + h >= len(dates)))),
            "history or outcome outside the prices",
        )
    out = outcomes.set_index("state_id").reindex(states["state_id"])
    if out["outcome_date"].isna().any():
        fail(states, int(np.argmax(out["outcome_date"].isna().to_numpy())), "no outcome")
    first_col = np.cumsum(k) - k
    blocks = None
    raw = None if signal_values is None else signals.read(cfg["market"]["data"]["signals"], st["signals"])
    for (fmt, kk, hd), group in states.groupby([states["format"], k, history], sort=False):
        rows = group.index.to_numpy()
        order = cols[first_col[rows][:, None] + np.arange(kk)]
        names = np.asarray(wide_closes.columns)[order]
        days = pos[rows]
        shown = states_mod.shown_sections(states_mod.features(closes, volume, days, order, hd, st["features"]), hd)
        if news is not None:
            blocks = states_mod.news_blocks(
                news, names, dates[days - st["window"] + 1].to_numpy(), dates[days].to_numpy(), st["news_items"]
            )
        sig = None if signal_values is None else signal_values[days[:, None], order]
        expect = prompts.render_batch(fmt, names, shown, h, blocks, freq, states_mod.signal_sections(sig, st))
        stored = pa.array(group["prompt"], pa.string())
        same = pc.fill_null(pc.equal(expect, stored), False).to_numpy(zero_copy_only=False)
        if not same.all():
            j = int(np.argmin(same))
            fail(states, rows[j], _first_difference(stored[j].as_py(), expect[j].as_py(), freq, hd, dates[days[j]]))
        want = states_mod.shown_returns(shown)
        got = lists.flat(group["shown_returns"], 2)
        if got.size != want.size or not np.array_equal(got.reshape(want.shape), want):
            bad = got.size != want.size or ~np.all(got.reshape(want.shape) == want, axis=(1, 2))
            fail(
                states,
                rows[int(np.argmax(np.broadcast_to(bad, len(rows))))],
                "shown_returns are not what the prompt shows",
            )
        if sig is not None:
            check_signals(states, rows, names, dates[days], cfg, raw)
        fwd = closes[(days + h)[:, None], order] / closes[days[:, None], order] - 1
        o = out.iloc[rows]
        got = lists.flat(o["forward_returns"], 1)
        wrong = pd.DatetimeIndex(o["outcome_date"]) != dates[days + h]
        wrong |= got.size != fwd.size or ~np.all(np.isclose(got.reshape(fwd.shape), fwd), axis=1)
        if wrong.any():
            fail(
                states,
                rows[int(np.argmax(wrong))],
                f"outcome is not the return over the next {frequency.periods(freq, h)}",
            )

    return splits_report(states, out["outcome_date"], pos, freq, st)


def check_signals(states: pd.DataFrame, rows: np.ndarray, names: np.ndarray, days, cfg: dict, raw: pd.DataFrame):
    """The ``signal_<name>`` columns of states ``rows`` (tickers ``names``, decision dates
    ``days``) hold each signal's latest value in the market.data.signals file (``raw``, as
    signals.read reads it) dated on or before the decision date, found by a DuckDB ASOF
    JOIN: not by the code that built them."""
    s, k = names.shape
    con = states_mod.shared_duckdb()
    con.register("raw", raw)
    wanted = pa.table(
        {"i": np.arange(s * k), "ticker": names.ravel().astype(str), "date": np.repeat(pd.DatetimeIndex(days), k)}
    )
    con.register("wanted", wanted)
    for name in cfg["market"]["states"]["signals"]:
        got = con.execute(
            "SELECT w.i, r.value FROM wanted w ASOF LEFT JOIN (SELECT * FROM raw WHERE name = ?) r"
            " ON w.ticker = r.ticker AND w.date >= r.date ORDER BY w.i",
            [name],
        ).fetchnumpy()
        want = prompts.signals_as_shown(np.asarray(got["value"], dtype=float)).reshape(s, k)
        column = f"{states_mod.SIGNAL_PREFIX}{name}"
        have = lists.flat(states.loc[rows, column], 1) if column in states else np.zeros(0)
        bad = np.ones(s, bool) if have.size != want.size else ~np.all(have.reshape(s, k) == want, axis=1)
        if bad.any():
            j = int(np.argmax(bad))
            shown = have.reshape(s, k)[j].tolist() if have.size == want.size else "missing"
            fail(
                states,
                rows[j],
                f"{column} is {shown}, but the latest values of {name} in {cfg['market']['data']['signals']} dated "
                f"on or before the decision date are {want[j].tolist()}",
            )


def splits_report(states: pd.DataFrame, outcome_dates: pd.Series, pos: np.ndarray, freq: str, st: dict) -> dict:
    """The audit's report: states checked, the frequency, and the splits' order
    (dated.splits_report, which raises on a split that reaches into the next)."""
    period = frequency.FREQUENCIES[freq][2]
    return {
        "states_checked": len(states),
        "frequency": freq,
        **dated.splits_report(states, outcome_dates, pos, st, period),
    }
