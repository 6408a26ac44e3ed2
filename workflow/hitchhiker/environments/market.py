"""The market environment: states from real prices, outcomes, the leakage audit, baselines.

State: one decision date T (a trading day) and k tickers (elementwise k = 1, pairwise k = 2,
listwise k = states.list_size) drawn without duplicates: each unordered ticker set at most
once per date, at most states.per_date sets per date. The tickers appear in a random order,
labelled A, B, ..., so "always answer A" earns nothing on average. For the ``window``
trading days ending at T, the prompt shows one section per states.features entry:

  returns  each ticker's daily returns in percent (the return into each shown day)
  prices   each ticker's closes as a percent of its close on T
  volume   each ticker's volume as a percent of its mean over the shown days

then, with data.news, the latest states.news_items headlines of its tickers dated between
the first shown day and T. When the chat-templated prompt is longer than
states.max_prompt_tokens, the oldest days are dropped first; ``history_days`` records how
many were kept. Nothing dated after T reaches a prompt (tests/test_properties.py perturbs
every later price and headline and finds every earlier state byte-identical).

Outcome: each ticker's simple return from the close of T to the close of T + horizon.
The answer grammar and the reward are in answers.py.

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
import pyarrow.compute as pc

from hitchhiker import config, frequency
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import answers

SECTIONS = {  # worded for the data's frequency (frequency.py): "Monthly returns", "these months"
    "returns": "{Adjective} returns in percent, oldest first, up to today's close.",
    "prices": "Closes as a percent of today's close, oldest first.",
    "volume": "Volume as a percent of its average over these {rows}, oldest first.",
}
NEWS = "Headlines, oldest first:"
QUESTION = {
    "pairwise": (
        "Which of A and B will return more over the next {horizon}? "
        "Answer with A or B as the first word, then one short reason."
    ),
    "elementwise": (
        "Over the next {horizon}, should we be long, flat or short {ticker}? "
        "Answer with long, flat or short as the first word, then one short reason."
    ),
    "listwise": (
        "Which of {labels} will return the most over the next {horizon}? Answer first "
        "with one letter, weights such as A=0.5, B=0.5, or a ranking such as {ranking}, then one short reason."
    ),
}
SPLITS = ("train", "validation", "test")
_LUT_MAX = 100_000  # values up to +-1000.00 are formatted by table lookup, the rare rest one by one


@functools.cache
def _lut(signed: bool) -> pa.Array:
    spec = "{:+.2f}" if signed else "{:.2f}"
    return pa.array([spec.format(h / 100) for h in range(-_LUT_MAX, _LUT_MAX + 1)])


def _format(values: np.ndarray, signed: bool) -> pa.Array:
    """Every value with two decimals ("+1.23" when signed), flattened, as Arrow strings."""
    flat = values.ravel()
    h = np.rint(flat * 100)
    ok = np.isfinite(h) & (np.abs(h) <= _LUT_MAX)
    out = _lut(signed).take(pa.array(np.where(ok, h + _LUT_MAX, 0).astype(np.int64)))
    if ok.all():
        return out
    spec = "{:+.2f}" if signed else "{:.2f}"
    text = out.to_numpy(zero_copy_only=False)
    text[~ok] = [spec.format(v) for v in flat[~ok]]
    return pa.array(text)


def _join(strings: pa.Array, every: int, sep: str) -> pa.Array:
    """Join each run of ``every`` consecutive strings with ``sep``."""
    offsets = pa.array(np.arange(0, len(strings) + 1, every, dtype=np.int32))
    return pc.binary_join(pa.ListArray.from_arrays(offsets, strings), sep)


def _cat(*parts, sep: str = "") -> pa.Array:
    return pc.binary_join_element_wise(*(p if isinstance(p, pa.Array) else pa.scalar(p) for p in parts), sep)


def headers(freq: str) -> dict[str, str]:
    """The section headers for data of frequency ``freq``."""
    adjective, one, _ = frequency.FREQUENCIES[freq][1:]
    rows = "days" if freq == "daily" else f"{one}s"
    return {key: text.format(Adjective=adjective, rows=rows) for key, text in SECTIONS.items()}


def render_batch(
    fmt: str,
    names: np.ndarray,
    features: dict[str, np.ndarray],
    horizon: int,
    news: pa.Array | None = None,
    freq: str = "daily",
) -> pa.Array:
    """User messages of many states of one format.

    ``names`` is (states, k) tickers in prompt order; ``features`` maps each section of
    SECTIONS to (states, k, days) values (returns as fractions, the others as ratios);
    ``news`` is one text block per state (or null for none); ``freq`` words the sections
    and the horizon.
    """
    words = headers(freq)
    horizon = frequency.periods(freq, horizon)
    n, k = names.shape
    letters = np.array(list(answers.labels(k)))
    tickers = pa.array(names.ravel().astype(str))
    label = tickers if fmt == "elementwise" else _cat(pa.array(np.tile(letters, n)), " (", tickers, ")")
    parts = []
    for key, values in features.items():
        days = values.shape[2]
        body = _join(_format(values * 100, signed=key == "returns"), days, " ")
        parts.append(_cat(words[key], _join(_cat(label, ": ", body), k, "\n"), sep="\n"))
    if news is not None:
        parts.append(_cat(NEWS, pc.fill_null(news, "none"), sep="\n"))
    if fmt == "elementwise":
        head, tail = QUESTION[fmt].split("{ticker}")
        question = _cat(head.format(horizon=horizon), tickers, tail)
    else:
        labels = ", ".join(letters[:-1]) + f" and {letters[-1]}"
        ranking = ">".join(letters[[1, 0, *range(2, k)]])
        question = pa.scalar(QUESTION[fmt].format(horizon=horizon, labels=labels, ranking=ranking))
    return _cat(*parts, question, sep="\n")


def render(fmt: str, tickers: list[str], returns: np.ndarray, horizon: int) -> str:
    """The user message of one state showing daily returns (``returns`` is (k, days) fractions)."""
    rets = np.asarray(returns, dtype=float)[None]
    return render_batch(fmt, np.array([tickers]), {"returns": rets}, horizon)[0].as_py()


def shown(prompt: str) -> dict[str, dict[str, np.ndarray]]:
    """The numbers a prompt shows: {section: {ticker: values as rendered}}."""
    out: dict[str, dict[str, np.ndarray]] = {}
    current = None
    headers_ = {v: k for freq in frequency.FREQUENCIES for k, v in headers(freq).items()}
    for line in prompt.splitlines():
        if line in headers_:
            current = out.setdefault(headers_[line], {})
        elif current is not None and ": " in line and not line.startswith(("Which", "Over")):
            name, values = line.split(": ", 1)
            try:
                current[name.split("(")[-1].rstrip(")")] = np.array([float(x) for x in values.split()])
            except ValueError:
                current = None
        else:
            current = None
    return out


def shown_returns(prompt: str) -> list[np.ndarray]:
    """The daily returns (in percent) a prompt shows for each ticker, in prompt order; read
    from the returns section, or derived from the prices section when only that is shown."""
    sections = shown(prompt)
    if "returns" in sections:
        return list(sections["returns"].values())
    return [100 * (p[1:] / p[:-1] - 1) for p in sections["prices"].values()]


def news_lines(prompt: str) -> list[str]:
    lines = prompt.splitlines()
    if NEWS not in lines:
        return []
    rest = lines[lines.index(NEWS) + 1 :]
    return [] if rest[:1] == ["none"] else list(itertools.takewhile(lambda s: s[:4].isdigit(), rest))


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
def _duckdb() -> duckdb.DuckDBPyConnection:
    """One in-memory DuckDB for the process (opening one costs more than a small query)."""
    return duckdb.connect()


def _news_blocks(news: pd.DataFrame, names: np.ndarray, first: np.ndarray, last: np.ndarray, n: int) -> pa.Array:
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
    con = _duckdb()
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


def _state_ids(fmt: str, dates: np.ndarray, horizon: int, names: np.ndarray, prompts: pa.Array) -> np.ndarray:
    """sha256(format, date, horizon, tickers, prompt)[:16], computed in DuckDB."""
    table = pa.table(
        {
            "d": pa.array(pd.DatetimeIndex(dates).strftime("%Y-%m-%d")),
            "t": _join(pa.array(names.ravel().astype(str)), names.shape[1], ","),
            "p": prompts,
        }
    )
    con = _duckdb()
    con.register("t", table)
    sql = "SELECT substr(sha256(concat_ws(chr(31), ?, d, ?, t, p)), 1, 16) AS id FROM t"
    return con.execute(sql, [fmt, str(horizon)]).fetchnumpy()["id"]


class Market:
    """Environment interface: make_states, parse, reward, audit, baselines (see __init__.py)."""

    name = "market"

    def prices_for_states(self, prices: pd.DataFrame, cfg: dict) -> pd.DataFrame:
        """Wide close table (dates x tickers) the states are built from."""
        return self._wide(prices, cfg, "close")

    def _wide(self, prices: pd.DataFrame, cfg: dict, column: str) -> pd.DataFrame:
        if column not in prices:
            raise HitchhikerError(
                f"config key states.features includes {column}, but the price table has no {column} column"
            )
        wide = prices.pivot(index="date", columns="ticker", values=column).sort_index()
        wide = wide[cfg["data"]["tickers"]].dropna()
        if len(wide) < cfg["states"]["window"] + cfg["states"]["horizon"] + 2:
            raise HitchhikerError(
                f"only {len(wide)} dates where every ticker has a price: too few for "
                f"states.window = {cfg['states']['window']} + states.horizon = {cfg['states']['horizon']}"
            )
        return wide

    def split_indices(self, dates: pd.DatetimeIndex, st: dict) -> dict[str, np.ndarray]:
        """Decision-date positions of each configured split, with the embargo between splits."""
        h, window = st["horizon"], st["window"]
        freq = frequency.detect(dates)
        eligible = np.arange(window, len(dates) - h)  # history before, the outcome after
        out: dict[str, np.ndarray] = {}
        for split in SPLITS:
            if st.get(split) is None:
                continue
            lo, hi = pd.Timestamp(st[split]["start"]), pd.Timestamp(st[split]["end"])
            out[split] = eligible[(dates[eligible] >= lo) & (dates[eligible] <= hi)][:: st["stride"]]
        # walking back from the last split, cut each earlier one to end an embargo before the next
        for nxt, prev in itertools.pairwise(reversed(list(out))):
            if len(out[nxt]):
                out[prev] = out[prev][out[prev] + config.embargo(st) <= out[nxt][0]]
        for split, idx in out.items():
            if len(idx) == 0:
                raise HitchhikerError(
                    f"config key states.{split}: no decision date in {st[split]['start']} .. {st[split]['end']} "
                    f"with {frequency.periods(freq, window)} of history before it, {frequency.periods(freq, h)} "
                    f"of outcome after it and the embargo before the next split (the {freq} prices in use run "
                    f"{dates[0].date()} .. {dates[-1].date()})"
                )
        return out

    def make_states(
        self, prices: pd.DataFrame, cfg: dict, fits, news: pd.DataFrame | None = None
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """States and outcomes for every split and format.

        ``fits(texts, budget)`` says whether each chat-templated prompt has at most ``budget``
        tokens of the policy's tokenizer (build_states.budget_check).
        """
        st = cfg["states"]
        wide = self.prices_for_states(prices, cfg)
        dates, closes = wide.index, wide.to_numpy()
        freq = frequency.detect(dates)
        volume = self._wide(prices, cfg, "volume").reindex(dates).to_numpy() if "volume" in st["features"] else None
        rng = np.random.default_rng(cfg.get("seed", 0))
        states, outcomes = [], []
        for split, idx in self.split_indices(dates, st).items():
            for fmt in st["formats"]:
                k = config.set_size(fmt, st)
                if k > closes.shape[1]:
                    raise HitchhikerError(
                        f"config key states.list_size = {k}: more than the {closes.shape[1]} tickers in data.tickers"
                    )
                pos, sets = _draw_sets(rng, len(idx), closes.shape[1], k, st["per_date"])
                cap = st[split]["max_states"]
                if cap is not None and len(pos) > cap:
                    keep = np.sort(rng.permutation(len(pos))[:cap])
                    pos, sets = pos[keep], sets[keep]
                order = np.take_along_axis(sets, np.argsort(rng.random(sets.shape), axis=1), axis=1)
                s, o = self._build(fmt, idx[pos], order, closes, volume, dates, wide.columns, st, fits, news, freq)
                s.insert(1, "split", split)
                o.insert(1, "split", split)
                states.append(s)
                outcomes.append(o)
        return pd.concat(states, ignore_index=True), pd.concat(outcomes, ignore_index=True)

    def _build(self, fmt, days, order, closes, volume, dates, columns, st, fits, news, freq):
        """States and outcomes of one split and format: decision-day positions ``days``, ticker
        indices ``order`` (states, k) in prompt order."""
        h, window = st["horizon"], st["window"]
        names = np.asarray(columns)[order]
        span = days[:, None] + np.arange(-window, 1)  # the close before the window .. the close on T
        c = closes[span[:, None, :], order[:, :, None]]  # (states, k, window + 1)
        full = {}
        if "returns" in st["features"]:
            full["returns"] = c[..., 1:] / c[..., :-1] - 1
        if "prices" in st["features"]:
            full["prices"] = c[..., 1:] / c[..., -1:]
        if volume is not None:
            full["volume"] = volume[span[:, None, 1:], order[:, :, None]]
        blocks = None
        if news is not None:
            blocks = _news_blocks(
                news, names, dates[days - window + 1].to_numpy(), dates[days].to_numpy(), st["news_items"]
            )

        def prompts_with(kept, rows):
            feats = {f: full[f][rows, :, window - kept :] for f in st["features"]}
            if "volume" in feats:  # relative to the mean over the days actually shown
                feats["volume"] = _relative_volume(feats["volume"])
            return render_batch(fmt, names[rows], feats, h, None if blocks is None else blocks.take(rows), freq)

        n = len(days)
        parts, placed = [], []
        kept = np.full(n, window)
        rows = np.arange(n)
        for days_kept in range(window, 1, -1):
            text = prompts_with(days_kept, rows)
            ok = np.asarray(fits(text, st["max_prompt_tokens"]), dtype=bool)
            parts.append(text.filter(pa.array(ok)))
            placed.append(rows[ok])
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
        prompt_arr = pa.concat_arrays(parts).take(pa.array(np.argsort(np.concatenate(placed), kind="stable")))
        ids = _state_ids(fmt, dates[days], h, names, prompt_arr)
        k = names.shape[1]
        tickers = pd.Series(
            pa.FixedSizeListArray.from_arrays(pa.array(names.ravel().astype(str)), k).cast(pa.list_(pa.string())),
            dtype=pd.ArrowDtype(pa.list_(pa.string())),
        )
        fwd = closes[(days + h)[:, None], order] / c[..., -1] - 1
        state_frame = pd.DataFrame(
            {
                "state_id": ids,
                "format": fmt,
                "date": dates[days],
                "horizon": h,
                "tickers": tickers,
                "prompt": pd.Series(prompt_arr, dtype=pd.ArrowDtype(pa.string())),
                "history_days": kept,
            }
        )
        outcome_frame = pd.DataFrame(
            {
                "state_id": ids,
                "format": fmt,
                "outcome_date": dates[days + h],
                "tickers": tickers,
                "forward_returns": pd.Series(
                    pa.FixedSizeListArray.from_arrays(pa.array(fwd.ravel()), k).cast(pa.list_(pa.float64())),
                    dtype=pd.ArrowDtype(pa.list_(pa.float64())),
                ),
            }
        )
        return state_frame, outcome_frame

    def audit(self, prices: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, cfg: dict) -> dict:
        """Re-derive every state from the prices up to its decision date; raise on the first violation.

        Checks that each section of each prompt equals the values of the ``history_days``
        trading days ending at the decision date T (so nothing after T is shown), that every
        headline is dated on or before T, that each outcome is the return from T to
        T + horizon, and that consecutive splits are separated by the embargo with no
        outcome of the earlier split reaching the later one's first decision date.
        """
        wide = self.prices_for_states(prices, cfg)
        dates, closes = wide.index, wide.to_numpy()
        freq = frequency.detect(dates)
        volume = None
        if "volume" in cfg["states"]["features"]:
            volume = self._wide(prices, cfg, "volume").reindex(dates).to_numpy()
        pos = {d: i for i, d in enumerate(dates)}
        col = {t: j for j, t in enumerate(wide.columns)}
        h = cfg["states"]["horizon"]
        out = outcomes.set_index("state_id")
        for s in states.itertuples():
            tickers = list(s.tickers)
            where = f"state {s.state_id} ({s.format} {', '.join(tickers)} on {s.date.date()})"
            i = pos.get(s.date)
            if i is None:
                raise HitchhikerError(f"leakage audit: {where}: decision date is not a date of the prices")
            cols = [col[t] for t in tickers]
            c = closes[i - s.history_days : i + 1, cols].T
            expect = {"returns": 100 * (c[:, 1:] / c[:, :-1] - 1), "prices": 100 * c[:, 1:] / c[:, -1:]}
            if volume is not None:
                expect["volume"] = 100 * _relative_volume(volume[i - s.history_days + 1 : i + 1, cols].T)
            sections = shown(s.prompt)
            if set(sections) != set(cfg["states"]["features"]):
                raise HitchhikerError(f"leakage audit: {where}: the prompt shows {sorted(sections)}")
            for section, values in sections.items():
                for j, ticker in enumerate(tickers):
                    got = values.get(ticker)
                    ok = got is not None and len(got) == s.history_days
                    if not ok or not np.allclose(got, expect[section][j], atol=0.0051):
                        raise HitchhikerError(
                            f"leakage audit: {where}: the {ticker} {section} in the prompt are not the "
                            f"{frequency.periods(freq, s.history_days)} ending at the decision date"
                        )
            late = [line for line in news_lines(s.prompt) if pd.Timestamp(line[:10]) > s.date]
            if late:
                raise HitchhikerError(f"leakage audit: {where}: headline dated after the decision date: {late[0]}")
            o = out.loc[s.state_id]
            fwd = closes[i + h, [col[t] for t in tickers]] / closes[i, [col[t] for t in tickers]] - 1
            if o.outcome_date != dates[i + h] or not np.allclose(list(o.forward_returns), fwd):
                raise HitchhikerError(
                    f"leakage audit: {where}: outcome is not the return over the next {frequency.periods(freq, h)}"
                )
        report = {"states_checked": len(states), "frequency": freq}
        present = [sp for sp in SPLITS if (states.split == sp).any()]
        for earlier, later in itertools.pairwise(present):
            a, b = states[states.split == earlier], states[states.split == later]
            gap = pos[b.date.min()] - pos[a.date.max()]
            reach = out.loc[a.state_id, "outcome_date"].max()
            if gap < config.embargo(cfg["states"]) or reach > b.date.min():
                raise HitchhikerError(
                    f"leakage audit: {earlier} outcomes reach {reach.date()}, the {later} window starts "
                    f"{b.date.min().date()} ({frequency.periods(freq, gap)} apart, "
                    f"embargo {config.embargo(cfg['states'])})"
                )
            report[f"{earlier}_to_{later}"] = {"last_outcome": str(reach.date()), "embargo_periods": int(gap)}
        for split in present:
            d = states[states.split == split].date
            report[f"{split}_dates"] = [str(d.min().date()), str(d.max().date())]
        return report

    def baselines(self, states: pd.DataFrame) -> dict[str, list[tuple[float, ...]]]:
        """Weights of simple rules on the same states, from the history each prompt shows.

        random: the expected weights of a uniformly random valid choice (1/k on each ticker;
        long/flat/short average to 0). always_first: always A, or always long (buy and hold).
        equal_weight: 1/k on each ticker, or long. momentum: all on the ticker with the highest
        summed shown return, or long if that sum is positive and short otherwise.
        mean_reversion: all on the lowest, or the opposite of momentum.
        """
        out: dict[str, list[tuple[float, ...]]] = {
            k: [] for k in ("random", "always_first", "equal_weight", "momentum", "mean_reversion")
        }
        for fmt, prompt in zip(states["format"], states["prompt"], strict=True):
            total = np.array([h.sum() for h in shown_returns(prompt)])
            k = len(total)
            if fmt == "elementwise":
                sign = 1.0 if total[0] > 0 else -1.0
                rows = {
                    "random": (0.0,),
                    "always_first": (1.0,),
                    "equal_weight": (1.0,),
                    "momentum": (sign,),
                    "mean_reversion": (-sign,),
                }
            else:
                even = tuple([1.0 / k] * k)
                rows = {
                    "random": even,
                    "always_first": tuple(np.eye(k)[0]),
                    "equal_weight": even,
                    "momentum": tuple(np.eye(k)[int(np.argmax(total))]),
                    "mean_reversion": tuple(np.eye(k)[int(np.argmin(total))]),
                }
            for name, w in rows.items():
                out[name].append(w)
        return out

    @staticmethod
    def parse(completion: str, fmt: str, k: int | None = None) -> answers.Action:
        return answers.parse(completion, fmt, k)

    @staticmethod
    def reward(action: answers.Action, forward_returns, reward_cfg: dict) -> float:
        return answers.reward(action, forward_returns, reward_cfg)
