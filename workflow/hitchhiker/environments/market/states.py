"""States and outcomes of the market environments, from a wide close table.

State: one decision date T and k tickers (elementwise k = 1, pairwise k = 2, listwise
k = market.states.list_size) drawn without duplicates: each unordered ticker set at most once per
date, at most market.states.per_date sets per date. The tickers appear in a random order, labelled
A, B, ..., so "always answer A" earns nothing on average. Its prompt (prompts.py) shows the
``window`` periods ending at T; when the chat-templated prompt is longer than
states.max_prompt_tokens, the oldest periods are dropped first (``history_days`` records how
many were kept). ``shown_returns`` holds, per ticker, the returns in percent the prompt shows
(or implies, from the prices section), as rounded there: what the baselines read. With
market.data.signals, the prompt also shows each of market.states.signals per ticker as of T (signals.py),
and a column ``signal_<name>`` each holds those values as shown.

Outcome: each ticker's simple return from the close of T to the close of T + horizon.

Every step is vectorised over states (NumPy for the arithmetic, Arrow for the text, DuckDB
for the news join and the state ids): there is no Python loop per state, which is what lets
benchmarks/states build a million states a minute.
"""

from __future__ import annotations

import functools
import itertools
import math

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from hitchhiker import frequency
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import dated
from hitchhiker.environments.market import lists, prompts, signals


def options(cfg: dict) -> dict:
    """What the market's states read: the shared states keys (window, horizon, splits) and
    its own (market.states: formats, per_date, features, ...), in one mapping; a stage that
    reads no states section (rollout, score) gets the market's own."""
    return {**cfg.get("states", {}), **cfg["market"]["states"]}


def set_size(fmt: str, states_cfg: dict) -> int:
    """Tickers in a state of format ``fmt``."""
    return {"elementwise": 1, "pairwise": 2}.get(fmt, states_cfg.get("list_size", 4))


def wide(prices: pd.DataFrame, cfg: dict, column: str = "close") -> pd.DataFrame:
    """The price table's ``column`` as dates x market.data.tickers, on the dates every ticker has."""
    if column not in prices:
        raise HitchhikerError(
            f"config key market.states.features includes {column}, but the price table has no {column} column"
        )
    wide = prices.pivot(index="date", columns="ticker", values=column).sort_index()
    wide = wide[cfg["market"]["data"]["tickers"]].dropna()
    if len(wide) < cfg["states"]["window"] + cfg["states"]["horizon"] + 2:
        raise HitchhikerError(
            f"only {len(wide)} dates where every ticker has a price: too few for "
            f"states.window = {cfg['states']['window']} + states.horizon = {cfg['states']['horizon']}"
        )
    return wide


def draws(dates: pd.DatetimeIndex, n_tickers: int, st: dict, seed: int):
    """Every decision a run's states are made of, in one seeded order: per split and format
    (market.states.formats), (split, format, decision-day positions in ``dates``, ticker indices in
    prompt order, one row per state). Up to market.states.per_date ticker sets a date, at most the
    split's max_states in all. The market's states and the sequential environment's episodes
    both draw here, so the same config gives the same decisions (and state ids) to both."""
    rng = np.random.default_rng(seed)
    for split, idx in split_indices(dates, st).items():
        for fmt in st["formats"]:
            k = set_size(fmt, st)
            if k > n_tickers:
                raise HitchhikerError(
                    f"config key market.states.list_size = {k}: more than the {n_tickers} tickers in "
                    "market.data.tickers"
                )
            pos, sets = _draw_sets(rng, len(idx), n_tickers, k, st["per_date"])
            cap = st[split]["max_states"]
            if cap is not None and len(pos) > cap:
                keep = np.sort(rng.permutation(len(pos))[:cap])
                pos, sets = pos[keep], sets[keep]
            yield split, fmt, idx[pos], np.take_along_axis(sets, np.argsort(rng.random(sets.shape), axis=1), axis=1)


def _draw_sets(rng, n_dates: int, n_tickers: int, k: int, per_date: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``per_date`` distinct unordered k-sets of ticker indices per date, uniformly.

    Returns (date position, sorted set) rows. Small universes enumerate the combinations;
    large ones draw k-tuples, drop those repeating a ticker or a set already drawn for the
    date, and top up until every date has its count.
    """
    total = math.comb(n_tickers, k)
    m = total if per_date is None else min(per_date, total)
    if total <= 1024:
        combos = np.array(list(itertools.combinations(range(n_tickers), k)))
        pick = np.argsort(rng.random((n_dates, total)), axis=1)[:, :m]
        return np.repeat(np.arange(n_dates), m), combos[pick.ravel()]
    dates, sets = np.empty(0, np.int64), np.empty((0, k), np.int64)
    need = np.full(n_dates, m)
    while need.any():
        d = np.repeat(np.arange(n_dates), 2 * need)
        s = np.sort(rng.integers(0, n_tickers, (len(d), k)), axis=1)
        keep = np.all(np.diff(s, axis=1) > 0, axis=1)
        rows = np.concatenate([np.column_stack([dates, sets]), np.column_stack([d[keep], s[keep]])])
        _, first = np.unique(rows, axis=0, return_index=True)
        rows = rows[np.sort(first)]  # distinct, in draw order (earlier rounds first)
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        start = np.searchsorted(rows[:, 0], rows[:, 0])
        rows = rows[np.arange(len(rows)) - start < m]
        dates, sets = rows[:, 0], rows[:, 1:]
        need = m - np.bincount(dates, minlength=n_dates)
    return dates, sets


@functools.cache
def shared_duckdb() -> duckdb.DuckDBPyConnection:
    """One in-memory DuckDB for the process (opening one costs more than a small query)."""
    return duckdb.connect()


def news_blocks(news: pd.DataFrame, names: np.ndarray, first: np.ndarray, last: np.ndarray, n: int) -> pa.Array:
    """Per state, its tickers' latest ``n`` headlines dated in [first, last], oldest first."""
    s, k = names.shape
    wanted = pa.table(
        {
            "i": np.repeat(np.arange(s), k),
            "ticker": names.ravel().astype(str),
            "lo": np.repeat(first, k),
            "hi": np.repeat(last, k),
        }
    )
    con = shared_duckdb()
    con.register("wanted", wanted)
    con.register("news", news)
    got = con.execute(
        """
        WITH hit AS (
          SELECT w.i, n.date, n.ticker, n.headline FROM wanted w JOIN news n
            ON n.ticker = w.ticker AND n.date >= w.lo AND n.date <= w.hi
          QUALIFY row_number() OVER (PARTITION BY w.i ORDER BY n.date DESC, n.ticker, n.headline) <= ?)
        SELECT i, string_agg(strftime(date, '%Y-%m-%d') || ' ' || ticker || ': ' || headline, chr(10)
                             ORDER BY date, ticker, headline) AS block
        FROM hit GROUP BY i
        """,
        [n],
    ).fetchnumpy()
    blocks = np.full(s, None, dtype=object)
    blocks[got["i"]] = got["block"]
    return pa.array(blocks, type=pa.string())


def _relative_volume(v: np.ndarray) -> np.ndarray:
    """Volume over the last axis as a multiple of its mean (1 where the mean is 0)."""
    mean = v.mean(axis=-1, keepdims=True)
    return np.divide(v, mean, out=np.ones_like(v, dtype=float), where=mean > 0)


def state_ids(fmt: str, dates: np.ndarray, horizon: int, names: np.ndarray, texts: pa.Array) -> np.ndarray:
    """sha256(format, date, horizon, tickers, prompt)[:16], computed in DuckDB."""
    table = pa.table(
        {
            "d": pa.array(pd.DatetimeIndex(dates).strftime("%Y-%m-%d")),
            "t": prompts.join(pa.array(names.ravel().astype(str)), names.shape[1], ","),
            "p": texts,
        }
    )
    con = shared_duckdb()
    con.register("t", table)
    sql = "SELECT substr(sha256(concat_ws(chr(31), ?, d, ?, t, p)), 1, 16) AS id FROM t"
    return con.execute(sql, [fmt, str(horizon)]).fetchnumpy()["id"]


def tables(prices: pd.DataFrame, cfg: dict, closes) -> tuple[pd.DataFrame, np.ndarray | None, np.ndarray | None]:
    """The close table ``closes(prices, cfg)`` gives; the volume on its dates when a prompt
    shows volume (market.states.features), else None; with market.data.signals, each of market.states.signals as
    of each of its dates (dates, tickers, signals), checked to be known on every decision
    date of every split, else None."""
    wide_closes = closes(prices, cfg)
    volume = signal_values = None
    st = options(cfg)
    if "volume" in st["features"]:
        volume = wide(prices, cfg, "volume").reindex(wide_closes.index).to_numpy()
    if cfg["market"]["data"]["signals"]:
        names, dates, tickers = st["signals"], wide_closes.index, list(wide_closes.columns)
        signal_values = signals.grid(signals.read(cfg["market"]["data"]["signals"], names), names, dates, tickers)
        for split, idx in split_indices(dates, cfg["states"]).items():
            signals.check_known(signal_values, idx, dates, tickers, names, split)
    return wide_closes, volume, signal_values


def check_features(prices: pd.DataFrame, cfg: dict) -> None:
    """The price table has what market.states.features shows (volume: a volume column)."""
    if "volume" in options(cfg)["features"] and "volume" not in prices:
        raise HitchhikerError(
            f"config key market.states.features includes volume, but the {cfg['market']['data']['source']} prices "
            "have none "
            "(a long file's volume column, a one-ticker OHLCV file or yfinance has one)"
        )


def split_indices(dates: pd.DatetimeIndex, st: dict) -> dict[str, np.ndarray]:
    """Decision-date positions of each configured split, with the embargo between splits."""
    h, window = st["horizon"], st["window"]
    freq = frequency.detect(dates)
    out = dated.decision_days(dates, st, history=window, ahead=h)  # history before, the outcome after
    for split, idx in out.items():
        if len(idx) == 0:
            raise HitchhikerError(
                f"config key states.{split}: no decision date in {st[split]['start']} .. {st[split]['end']} "
                f"with {frequency.periods(freq, window)} of history before it, {frequency.periods(freq, h)} "
                f"of outcome after it and the embargo before the next split (the {freq} prices in use run "
                f"{dates[0].date()} .. {dates[-1].date()})"
            )
    return out


def features(closes: np.ndarray, volume: np.ndarray | None, days: np.ndarray, order: np.ndarray, n: int, wanted):
    """Each wanted section's values (states, k, n) over the ``n`` periods ending at
    decision-day positions ``days``, for ticker indices ``order`` (states, k): returns as
    fractions, prices as ratios to the close on T, volume as is."""
    span = days[:, None] + np.arange(-n, 1)  # the close before the first period .. the close on T
    c = closes[span[:, None, :], order[:, :, None]]  # (states, k, n + 1)
    out = {}
    if "returns" in wanted:
        out["returns"] = c[..., 1:] / c[..., :-1] - 1
    if "prices" in wanted:
        out["prices"] = c[..., 1:] / c[..., -1:]
    if "volume" in wanted:
        out["volume"] = volume[span[:, None, 1:], order[:, :, None]]
    return out


def shown_returns(shown: dict[str, np.ndarray]) -> np.ndarray:
    """Per state and ticker, the returns in percent that sections ``shown`` (what one prompt
    renders, (states, k, periods)) show: the returns section, or the returns implied by the
    prices section as rounded there; none when it shows only volume."""
    if "returns" in shown:
        return prompts.as_shown(100 * shown["returns"])
    if "prices" not in shown:
        return np.zeros((*next(iter(shown.values())).shape[:2], 0))
    p = prompts.as_shown(100 * shown["prices"])
    return 100 * (p[..., 1:] / p[..., :-1] - 1)


SIGNAL_PREFIX = "signal_"


def signal_columns(values: np.ndarray | None, names: list[str]) -> dict[str, pd.Series]:
    """A column per market.data.signals name, ``signal_<name>``: per state, each ticker's value as
    its prompt shows it (what the higher-signal baselines read). None without signals."""
    if values is None:
        return {}
    shown = prompts.signals_as_shown(values)
    return {f"{SIGNAL_PREFIX}{name}": lists.from_array(shown[..., j]) for j, name in enumerate(names)}


def make_states(
    wide_closes: pd.DataFrame,
    volume: np.ndarray | None,
    signal_values: np.ndarray | None,
    cfg: dict,
    fits,
    news: pd.DataFrame | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """States and outcomes for every split and format from the tables of :func:`tables`.

    ``fits(texts, budget)`` says whether each chat-templated prompt has at most ``budget``
    tokens of the policy's tokenizer (build_states.budget_check).
    """
    st = options(cfg)
    dates, closes = wide_closes.index, wide_closes.to_numpy()
    freq = frequency.detect(dates)
    states, outcomes = [], []
    for split, fmt, days, order in draws(dates, closes.shape[1], st, cfg.get("seed", 0)):
        shown_signals = None if signal_values is None else signal_values[days[:, None], order]  # (states, k, names)
        s, o = _build(fmt, days, order, closes, volume, dates, wide_closes.columns, st, fits, news, freq, shown_signals)
        s.insert(1, "split", split)
        o.insert(1, "split", split)
        states.append(s)
        outcomes.append(o)
    return pd.concat(states, ignore_index=True), pd.concat(outcomes, ignore_index=True)


def shown_sections(full: dict[str, np.ndarray], kept: int | np.ndarray, rows=slice(None)) -> dict[str, np.ndarray]:
    """The sections a prompt shows when it keeps the last ``kept`` of the ``full`` periods
    (volume relative to its mean over the periods kept)."""
    n = next(iter(full.values())).shape[2]
    out = {f: v[rows, :, n - kept :] for f, v in full.items()}
    if "volume" in out:
        out["volume"] = _relative_volume(out["volume"])
    return out


def signal_sections(values: np.ndarray | None, st: dict) -> dict[str, np.ndarray] | None:
    """(states, k, signals) values as prompts.render_batch takes them: {name: (states, k)}."""
    return None if values is None else {name: values[..., j] for j, name in enumerate(st["signals"])}


def _build(fmt, days, order, closes, volume, dates, columns, st, fits, news, freq, signal_values):
    """States and outcomes of one split and format: decision-day positions ``days``, ticker
    indices ``order`` (states, k) in prompt order, and the signals each shows (states, k, names)."""
    h, window = st["horizon"], st["window"]
    names = np.asarray(columns)[order]
    full = features(closes, volume, days, order, window, st["features"])
    blocks = None
    if news is not None:
        blocks = news_blocks(news, names, dates[days - window + 1].to_numpy(), dates[days].to_numpy(), st["news_items"])

    n = len(days)
    parts, placed = [], []
    returns, width = np.zeros((n, names.shape[1], window)), np.zeros(n, dtype=np.int64)  # in state order
    kept = np.full(n, window)
    rows = np.arange(n)
    for days_kept in range(window, 1, -1):
        shown = shown_sections(full, days_kept, rows)
        sig = signal_sections(None if signal_values is None else signal_values[rows], st)
        text = prompts.render_batch(
            fmt, names[rows], shown, h, None if blocks is None else blocks.take(rows), freq, sig
        )
        ok = np.asarray(fits(text, st["max_prompt_tokens"]), dtype=bool)
        parts.append(text.filter(pa.array(ok)))
        placed.append(rows[ok])
        shown_ret = shown_returns(shown)[ok]
        p = shown_ret.shape[2]
        returns[rows[ok], :, window - p :] = shown_ret
        width[rows[ok]] = p
        kept[rows[ok]] = days_kept
        rows = rows[~ok]
        if not len(rows):
            break
    if len(rows):
        raise HitchhikerError(
            f"config key states.max_prompt_tokens = {st['max_prompt_tokens']}: a {fmt} prompt with "
            f"2 days of history does not fit"
        )
    # back into state order: the chunk holding state i at position j
    back = pa.array(np.argsort(np.concatenate(placed), kind="stable"))
    prompt_arr = pa.concat_arrays(parts).take(back)
    ids = state_ids(fmt, dates[days], h, names, prompt_arr)
    tickers = lists.from_array(names.astype(str), pa.string())
    fwd = closes[(days + h)[:, None], order] / closes[days[:, None], order] - 1
    state_frame = pd.DataFrame(
        {
            "state_id": ids,
            "format": fmt,
            "date": dates[days],
            "horizon": h,
            "tickers": tickers,
            "prompt": pd.Series(prompt_arr, dtype=pd.ArrowDtype(pa.string())),
            "history_days": kept,
            "shown_returns": lists.ragged(returns, width),
            **signal_columns(signal_values, st["signals"]),
        }
    )
    outcome_frame = pd.DataFrame(
        {
            "state_id": ids,
            "format": fmt,
            "outcome_date": dates[days + h],
            "tickers": tickers,
            "forward_returns": lists.from_array(fwd),
        }
    )
    return state_frame, outcome_frame
