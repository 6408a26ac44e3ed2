"""The market environment: answer grammar, dollar rewards, states without look-ahead."""

import numpy as np
import pandas as pd
import pytest

from conftest import tiny_config
from hitchhiker import config
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import get, market


@pytest.mark.parametrize(
    "text, fmt, action, weights",
    [
        ("A", "pairwise", "A", (1.0, 0.0)),
        ("  b. B's momentum is stronger", "pairwise", "B", (0.0, 1.0)),
        ("A: higher recent returns", "pairwise", "A", (1.0, 0.0)),
        ("Long, the trend is up", "elementwise", "long", (1.0,)),
        ("\nSHORT - falling", "elementwise", "short", (-1.0,)),
        ("flat", "elementwise", "flat", (0.0,)),
    ],
)
def test_parse_valid(text, fmt, action, weights):
    a = market.parse(text, fmt)
    assert a.valid and a.action == action and a.weights == weights


@pytest.mark.parametrize(
    "text, fmt, reason",
    [
        ("", "pairwise", "empty"),
        ("   \n", "pairwise", "empty"),
        ("Answer: A", "pairwise", "not_an_action"),
        ("AB", "pairwise", "not_an_action"),
        ("C", "pairwise", "not_an_action"),
        ("long", "pairwise", "not_an_action"),
        ("A", "elementwise", "not_an_action"),
        ("longer", "elementwise", "not_an_action"),
        ("42 long", "elementwise", "not_an_action"),
    ],
)
def test_parse_invalid_with_reason(text, fmt, reason):
    a = market.parse(text, fmt)
    assert not a.valid and a.invalid_reason == reason and a.action is None


def test_reward_worked_examples_to_the_cent():
    # $1 on A, A returns +3.2%, B -1.0%: the answer earns $0.032.
    assert market.reward(market.parse("A", "pairwise"), [0.032, -0.010], -0.05) == pytest.approx(0.032)
    assert market.reward(market.parse("B", "pairwise"), [0.032, -0.010], -0.05) == pytest.approx(-0.010)
    # short $1 of a stock that falls 4.5% earns $0.045; flat earns nothing
    assert market.reward(market.parse("short", "elementwise"), [-0.045], -0.05) == pytest.approx(0.045)
    assert market.reward(market.parse("flat", "elementwise"), [-0.045], -0.05) == 0.0
    assert market.reward(market.parse("maybe", "elementwise"), [-0.045], -0.05) == -0.05


def _prices(n_days=400, tickers=("AAPL", "MSFT", "KO"), seed=1):
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2016-01-01", periods=n_days)
    closes = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, (n_days, len(tickers))), axis=0))
    wide = pd.DataFrame(closes, index=dates, columns=list(tickers))
    return wide.rename_axis("date").reset_index().melt(id_vars="date", var_name="ticker", value_name="close")


def _cfg():
    cfg = tiny_config()
    cfg["states"].update(
        train={"start": "2016-01-01", "end": "2016-09-30", "max_states": 1000},
        test={"start": "2016-11-01", "end": "2017-06-30", "max_states": 1000},
    )
    return config.validate(cfg)


def _count(text):
    return len(text.split())


def test_states_never_see_prices_after_their_decision_date():
    cfg = _cfg()
    prices = _prices()
    states, _ = get("market").make_states(prices, cfg, _count)
    cut = states["date"].sort_values().iloc[len(states) // 2]
    shocked = prices.copy()
    later = shocked["date"] > cut
    shocked.loc[later, "close"] *= np.random.default_rng(0).uniform(0.5, 1.5, later.sum())
    again, _ = get("market").make_states(shocked, cfg, _count)
    before = states[states.date <= cut].set_index("state_id")
    assert len(before) > 20
    assert set(before.index) <= set(again.state_id)  # same content hash => same prompt
    pd.testing.assert_series_equal(before.prompt, again.set_index("state_id").loc[before.index].prompt)


def test_outcomes_are_forward_returns_and_train_respects_the_embargo():
    cfg = _cfg()
    prices = _prices()
    states, outcomes = get("market").make_states(prices, cfg, _count)
    wide = prices.pivot(index="date", columns="ticker", values="close")
    days = list(wide.index)
    h = cfg["states"]["horizon"]
    merged = states.merge(outcomes, on="state_id", suffixes=("", "_o"))
    for row in merged.sample(20, random_state=0).itertuples():
        i = days.index(row.date)
        expect = [wide[t].iloc[i + h] / wide[t].iloc[i] - 1 for t in row.tickers]
        assert row.forward_returns == pytest.approx(expect)
        assert row.outcome_date == days[i + h]
    first_test = states[states.split == "test"].date.min()
    last_train_outcome = outcomes[outcomes.split == "train"].outcome_date.max()
    assert last_train_outcome <= first_test
    assert days.index(first_test) - days.index(states[states.split == "train"].date.max()) >= h


def test_pairs_are_unique_per_date_and_order_is_randomised():
    states, _ = get("market").make_states(_prices(), _cfg(), _count)
    pairs = states[states.format == "pairwise"]
    keys = pairs.apply(lambda r: (r.date, frozenset(r.tickers)), axis=1)
    assert keys.is_unique
    firsts = pairs.tickers.map(lambda t: t[0])
    assert firsts.nunique() == 3  # every ticker appears in position A somewhere


def test_token_budget_trims_the_oldest_history_first():
    cfg = _cfg()
    full, _ = get("market").make_states(_prices(), cfg, _count)
    budget = int(full.prompt.map(_count).max()) - 3
    cfg["states"]["max_prompt_tokens"] = budget
    trimmed, _ = get("market").make_states(_prices(), cfg, _count)
    assert trimmed.prompt.map(_count).max() <= budget
    assert trimmed.history_days.min() < cfg["states"]["window"]
    row = trimmed[trimmed.history_days < cfg["states"]["window"]].iloc[0]
    long = full[(full.date == row.date) & (full.tickers.map(tuple) == tuple(row.tickers))].iloc[0]
    kept = row.prompt.splitlines()[1].split()[-row.history_days :]
    assert long.prompt.splitlines()[1].split()[-row.history_days :] == kept


def test_budget_too_small_for_any_history_is_an_error():
    cfg = _cfg()
    cfg["states"]["max_prompt_tokens"] = 16
    with pytest.raises(HitchhikerError, match="max_prompt_tokens"):
        get("market").make_states(_prices(), cfg, _count)


def test_synthetic_environment_plants_a_learnable_signal():
    cfg = _cfg()
    states, outcomes = get("synthetic").make_states(_prices(n_days=800), cfg, _count)
    df = states.merge(outcomes[["state_id", "forward_returns"]], on="state_id")
    pair = df[df.format == "pairwise"]
    last = pair.prompt.map(lambda p: [h[-1] for h in market.shown_returns(p, 2)])
    pick_bigger = [r[int(np.argmax(x))] for x, r in zip(last, pair.forward_returns, strict=True)]
    winner = [max(r) for r in pair.forward_returns]
    hit = np.mean(np.isclose(pick_bigger, winner))
    assert hit > 0.7  # a policy that reads the last return beats a coin flip by far
