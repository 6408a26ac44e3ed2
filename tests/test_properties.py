"""Properties of the market states that must hold for any prices and any configuration,
checked by hypothesis on hundreds of generated cases: no look-ahead, no overlap between
splits, no duplicate ticker sets."""

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import tiny_config
from hitchhiker import config
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import get

TICKERS = ["AAA", "BBB", "CCC", "DDD"]
DAYS = pd.bdate_range("2018-01-01", periods=160)


def _count(texts):
    return np.array([len(t.split()) for t in texts])


def _fits(texts, budget):
    return _count(texts.to_pylist()) <= budget  # make_states passes Arrow strings


@st.composite
def cases(draw):
    n = draw(st.integers(2, 4))
    tickers = TICKERS[:n]
    formats = draw(
        st.lists(
            st.sampled_from(["elementwise", "pairwise", "listwise"] if n >= 3 else ["elementwise", "pairwise"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    horizon = draw(st.integers(1, 6))
    cfg = tiny_config()
    cfg["market"]["data"]["tickers"] = tickers
    window, stride, embargo = draw(st.integers(2, 8)), draw(st.integers(1, 4)), horizon + draw(st.integers(0, 3))
    cfg["market"]["states"] = {
        "formats": formats,
        "list_size": 3,
        "per_date": draw(st.one_of(st.none(), st.integers(1, 3))),
        "features": draw(st.lists(st.sampled_from(["returns", "prices", "volume"]), min_size=1, unique=True)),
        "news_items": 2,
    }
    cfg["states"] = {
        "horizon": horizon,
        "window": window,
        "stride": stride,
        "embargo": embargo,
        # mostly roomy, so that most examples build states; sometimes tight, so that trimming runs
        "max_prompt_tokens": draw(st.integers(40, 200)) if draw(st.integers(0, 3)) == 3 else 1000,
        "train": {"start": "2018-01-01", "end": "2018-03-15", "max_states": draw(st.integers(1, 60))},
        "validation": {"start": "2018-03-20", "end": "2018-04-20", "max_states": 40},
        "test": {"start": "2018-04-25", "end": "2018-07-31", "max_states": 40},
    }
    cfg["seed"] = draw(st.integers(0, 3))
    seed = draw(st.integers(0, 10**6))
    rng = np.random.default_rng(seed)
    closes = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, (len(DAYS), n)), axis=0))
    wide = pd.DataFrame(closes, index=DAYS, columns=tickers).rename_axis("date")
    prices = wide.reset_index().melt(id_vars="date", var_name="ticker", value_name="close")
    prices["volume"] = rng.integers(1, 10_000, len(prices)).astype(float)
    news = pd.DataFrame({"date": DAYS.repeat(n), "ticker": np.tile(tickers, len(DAYS))})
    news["headline"] = [f"h{i}" for i in range(len(news))]
    cut = DAYS[draw(st.integers(10, len(DAYS) - 10))]
    if draw(st.booleans()):  # market.data.signals: a score per ticker on the first day and on random later ones
        days = DAYS[np.r_[0, np.flatnonzero(rng.random(len(DAYS) - 1) < 0.3) + 1]]
        table = pd.DataFrame({"date": days.repeat(n), "ticker": np.tile(tickers, len(days)), "name": "score"})
        table["value"] = rng.normal(0, 1, len(table))
        cfg["market"]["data"]["signals"], cfg["market"]["states"]["signals"] = _write(table), ["score"]
    return config.validate(cfg), prices, news, cut, rng


def _write(table: pd.DataFrame) -> str:
    """A CSV file of ``table`` (hypothesis examples get no tmp_path)."""
    path = Path(tempfile.mkdtemp()) / "signals.csv"
    table.to_csv(path, index=False)
    return str(path)


def _build(cfg, prices, news):
    try:
        return get("market").make_states(prices, cfg, _fits, news=news)
    except HitchhikerError as err:  # a budget too tight for any history is a legitimate, reported outcome
        assert "max_prompt_tokens" in str(err)
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_no_state_depends_on_anything_after_its_decision_date(case):
    cfg, prices, news, cut, rng = case
    built = _build(cfg, prices, news)
    if built is None:
        return
    states, _ = built
    later = prices["date"] > cut
    shocked = prices.copy()
    shocked.loc[later, "close"] *= rng.uniform(0.2, 5.0, later.sum())
    shocked.loc[later, "volume"] *= rng.uniform(0.2, 5.0, later.sum())
    late_news = news.copy()
    late_news.loc[late_news.date > cut, "headline"] += "x"  # same token count, other text
    if cfg["market"]["data"]["signals"]:  # later values changed, and one more dated after the cut
        table = pd.read_csv(cfg["market"]["data"]["signals"], parse_dates=["date"])
        table.loc[table.date > cut, "value"] += 10
        extra = table.iloc[[0]].assign(date=cut + pd.Timedelta(days=1), value=-99.0)
        later_signals = _write(pd.concat([table, extra]).drop_duplicates(["date", "ticker"], keep="first"))
        cfg = {**cfg, "market": {**cfg["market"], "data": {**cfg["market"]["data"], "signals": later_signals}}}
    again, _ = get("market").make_states(shocked, cfg, _fits, news=late_news)
    before = states[states.date <= cut].set_index("state_id")
    after = again.set_index("state_id")
    assert set(before.index) <= set(after.index)
    assert list(after.loc[before.index, "prompt"]) == list(before.prompt)  # byte-identical


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_no_outcome_reaches_a_later_split_and_no_set_repeats_on_a_date(case):
    cfg, prices, _, _, _ = case
    built = _build(cfg, prices, None)
    if built is None:
        return
    states, outcomes = built
    out = outcomes.set_index("state_id").outcome_date
    pos = {d: i for i, d in enumerate(DAYS)}
    splits = [s for s in ("train", "validation", "test") if (states.split == s).any()]
    for earlier, later in itertools.pairwise(splits):
        a, b = states[states.split == earlier], states[states.split == later]
        assert out[a.state_id].max() <= b.date.min()
        assert pos[b.date.min()] - pos[a.date.max()] >= cfg["states"]["embargo"]
    keys = [(d, f, frozenset(t)) for d, f, t in zip(states.date, states.format, states.tickers, strict=True)]
    assert len(keys) == len(set(keys))
    assert all(len(set(t)) == len(t) for t in states.tickers)


@st.composite
def episodes(draw):
    """A sequential config over the same generated prices: 1 to 4 turns of 1 to 4 periods."""
    cfg, prices, _, cut, rng = draw(cases())
    turns, step = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    states_cfg = {**cfg["states"], "horizon": turns * step, "embargo": turns * step, "max_prompt_tokens": 1000}
    own = {"data": {**cfg["market"]["data"], "signals": None},  # it shows no signals
           "states": {**cfg["market"]["states"], "turns": turns, "formats": ["pairwise"], "signals": []}}  # fmt: skip
    cfg = config.validate({**cfg, "environment": "sequential", "states": states_cfg, "market": own})
    answers = draw(st.lists(st.sampled_from(["A", "B", "A=0.3, B=0.7", "B>A", "no idea"]), min_size=4, max_size=4))
    return cfg, prices, cut, rng, answers


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes())
def test_no_turn_of_an_episode_depends_on_anything_after_that_turns_date(case):
    """Every turn's message (the first prompt, then each next_turn for the same answers) is
    byte-identical when every price after a cut changes, for each turn dated on or before it."""
    cfg, prices, cut, rng, said = case
    env = get("sequential")
    reward = {"cost_bps": 10, "invalid_penalty": -0.05, "benchmark": "none", "returns": "simple"}
    try:
        states, _ = env.make_states(prices, cfg, _fits)
    except HitchhikerError as err:  # too few dates for an episode in a split: reported, not a leak
        assert "no decision date" in str(err)
        return
    later = prices["date"] > cut
    shocked = prices.copy()
    shocked.loc[later, "close"] *= rng.uniform(0.2, 5.0, later.sum())
    again = env.make_states(shocked, cfg, _fits)[0].set_index("state_id")
    checked = 0
    for state in states.itertuples(index=False):
        s = pd.Series(state._asdict())
        for t, day in enumerate(s.turn_dates):
            if pd.Timestamp(day) > cut:
                break
            other = again.loc[s.state_id] if s.state_id in again.index else None
            assert other is not None  # the first prompt is the same, so is the id
            ours = s.prompt if t == 0 else env.next_turn(s, said[:t], reward)
            theirs = other.prompt if t == 0 else env.next_turn(other, said[:t], reward)
            assert ours == theirs, (s.state_id, t)
            checked += 1
    assert checked or states.date.min() > cut
