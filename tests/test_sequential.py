"""The sequential portfolio environment: the episode's arithmetic by hand, what each turn shows,
the audit of every turn, and configs/sequential.yaml through every stage of the DAG."""

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
from test_market import _prices

from conftest import ROOT, run, tiny_config
from hitchhiker import config
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import get
from hitchhiker.environments.market import hallucination, lists, prompts, sequential

REWARD = {"cost_bps": 10, "invalid_penalty": -0.05, "benchmark": "none", "returns": "simple"}


def test_an_episode_by_hand():
    # two turns on (A, B): +10% / -10%, then -5% / +5%; 10 bps a side
    returns = np.array([[[0.10, -0.10], [-0.05, 0.05]]])
    # all on A, then half and half: buy 1.0 of A (cost 0.001), A rises to V = 0.999 * 1.1 = 1.0989;
    # rebalancing from (1, 0) to (0.5, 0.5) trades 1.0 (cost 0.001 of V), the period is flat,
    # selling everything at the end trades 1.0: V = 1.0989 * 0.999 * 0.999 = 1.096703...
    w = np.array([[[1.0, 0.0], [0.5, 0.5]]])
    got = sequential.outcomes_of(w, returns, np.zeros(1), REWARD)
    assert got["episode_return"][0] == pytest.approx(1.0989 * 0.999 * 0.999 - 1)
    assert got["reward"][0] == pytest.approx(1.0989 * 0.999 * 0.999 - 1)
    assert got["turnover"][0] == pytest.approx(1.0)  # the rebalancing at turn 2 (the first buy is not turnover)
    assert got["drawdown"][0] == pytest.approx(1 - 0.999 * 0.999)  # from the peak 1.0989
    # an invalid second answer holds (1, 0): A falls 5%, no trade; half the penalty (1 of 2 turns)
    hold = np.array([[[1.0, 0.0], [np.nan, np.nan]]])
    got = sequential.outcomes_of(hold, returns, np.ones(1), REWARD)
    assert got["episode_return"][0] == pytest.approx(1.0989 * 0.95 * 0.999 - 1)
    assert got["reward"][0] == pytest.approx(1.0989 * 0.95 * 0.999 - 1 - 0.05 / 2)
    assert got["turnover"][0] == 0
    # benchmark equal_weight: the equal-weight portfolio rebalanced each turn, no costs: (1 + 0)(1 + 0) - 1
    assert sequential.outcomes_of(w, returns, np.zeros(1), {**REWARD, "benchmark": "equal_weight"})["reward"][
        0
    ] == pytest.approx(1.0989 * 0.999 * 0.999 - 1)


def _cfg(**own):
    cfg = tiny_config(environment="sequential", market={"states": {"formats": ["pairwise"], "turns": 3, **own}})
    cfg["states"].update(
        horizon=9, window=4, stride=5,
        train={"start": "2016-01-01", "end": "2016-06-30", "max_states": 40},
        test={"start": "2016-08-01", "end": "2016-12-31", "max_states": 40},
    )  # fmt: skip
    return config.validate(cfg)


def _fits(texts, budget):
    return np.ones(len(texts), bool)


def test_each_turn_shows_the_returns_since_the_last_and_the_portfolio_it_reached():
    cfg, prices = _cfg(), _prices(n_days=300)
    env = get("sequential")
    states, outcomes = env.make_states(prices, cfg, _fits)
    s = states.iloc[0]
    wide = prices.pivot(index="date", columns="ticker", values="close")
    t0 = wide.index.get_loc(s.date)
    assert list(pd.DatetimeIndex(s.turn_dates)) == list(wide.index[[t0, t0 + 3, t0 + 6]])
    assert "Portfolio: $1.0000, all in cash." in s.prompt and "Turn 1 of 3" in s.prompt
    message = env.next_turn(s, ["A"], REWARD)
    a, b = s.tickers
    r = wide[a].iloc[t0 + 1 : t0 + 4].to_numpy() / wide[a].iloc[t0 : t0 + 3].to_numpy() - 1  # the 3 days since turn 1
    assert f"A ({a}): " + " ".join(f"{x:+.2f}" for x in prompts.as_shown(100 * r)) in message
    value = 0.999 * wide[a].iloc[t0 + 3] / wide[a].iloc[t0]  # all on A, bought at 10 bps
    assert f"Portfolio: ${value:.4f}, A=1.00." in message and "Turn 2 of 3" in message
    assert env.next_turn(s, ["A", "B", "A"], REWARD) is None
    # the outcome of each period is the return from its turn's close to the next
    o = outcomes.set_index("state_id").loc[s.state_id]
    assert np.allclose(o.period_returns[1], wide[[a, b]].iloc[t0 + 6].to_numpy() / wide[[a, b]].iloc[t0 + 3] - 1)


def test_an_episode_counts_the_claims_of_every_turn_against_that_turns_prompt():
    cfg, prices = _cfg(), _prices(n_days=300)
    env = get("sequential")
    states, outcomes = env.make_states(prices, cfg, _fits)
    s = states.iloc[0]
    said = [["A since A rose 7% over the last 20 days", "B: +0.13 +1.44 = +0.25 so", "A (MSFT) on Monday"], ["B"], []]
    samples = pd.DataFrame({"state_id": s.state_id, "sample_idx": range(3), "answers": said})
    samples["completion"] = samples["answers"].map(" ".join)
    got = env.score(samples, states, outcomes, REWARD)
    for row, turns in zip(got.itertuples(), said, strict=True):  # turn by turn, each against its own prompt
        shown = env._turn_prompts(s, turns, REWARD)
        each = [hallucination.check(a, p, s.tickers) for a, p in zip(turns, shown, strict=False)]
        assert [getattr(row, f) for f in hallucination.Claims._fields] == list(
            np.sum(each, axis=0, dtype=int) if each else [0] * 8
        )
    assert got["unsupported_claims"].tolist()[0] > 0 and got["unsupported_claims"].tolist()[1:] == [0, 0]


def test_the_audit_checks_every_turn():
    cfg, prices = _cfg(), _prices(n_days=300)
    env = get("sequential")
    states, outcomes = env.make_states(prices, cfg, _fits)
    report = env.audit(prices, states, outcomes, cfg)
    assert report["states_checked"] == len(states) and report["train_to_test"]["embargo_periods"] >= 9
    bad = states.copy()
    history = [lists.plain(h) for h in states.turn_history]
    history[2][1][0][-1] += 0.01  # state 2's turn 3 shows another last day for A
    bad["turn_history"] = pd.Series(history, dtype=object)
    with pytest.raises(HitchhikerError, match=f"state {states.state_id[2]} .*turn 3's turn_history are not"):
        env.audit(prices, bad, outcomes, cfg)
    bad = states.copy()
    bad.loc[1, "prompt"] = bad.prompt[1].replace("all in cash", "A=1.00")
    with pytest.raises(HitchhikerError, match="first turn's prompt is not"):
        env.audit(prices, bad, outcomes, cfg)


@pytest.mark.parametrize(
    "own, message",
    [
        ({"turns": 4}, r"market\.states\.turns = 4: states\.horizon = 9 \(the episode's length\) must be a multiple"),
        ({"formats": ["elementwise"]}, "pairwise or listwise, not elementwise"),
    ],
)
def test_bad_episode_config_is_one_line(own, message):
    with pytest.raises(HitchhikerError, match=message):
        _cfg(**own)


def test_a_market_config_with_several_turns_is_refused():
    cfg = tiny_config()
    cfg["market"]["states"]["turns"] = 2
    with pytest.raises(HitchhikerError, match=r"states\.turns = 2: episodes of several turns are the sequential"):
        config.validate(cfg)


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    d = tmp_path_factory.mktemp("sequential")
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", ROOT / "configs" / "sequential.yaml", "--cores", "2",
        cwd=d)  # fmt: skip
    return d / "results" / "sequential"


@pytest.mark.slow
def test_the_buffer_holds_whole_trajectories(episodes):
    with duckdb.connect(str(episodes / "buffer" / "round_2.duckdb"), read_only=True) as con:
        ro = con.execute("SELECT * FROM rollouts").df()
        scores = con.execute("SELECT * FROM scores").df()
    assert set(ro["round"]) == {1, 2} and (ro.answers.map(len) == 4).all()
    for row in ro.itertuples():
        mask = np.asarray(row.model_mask)
        assert len(mask) == len(row.completion_ids) == len(row.logprobs)
        # four runs of the model's tokens, the environment's three turns between them
        assert np.count_nonzero(np.diff(mask) == -1) == 3 and mask[0] == 1 and mask[-1] == 1
        assert np.all(np.asarray(row.logprobs)[mask == 0] == 0)
    assert {"episode_return", "turnover", "drawdown", "invalid_turns", "reward", "environment_reward"} <= set(scores)


@pytest.mark.slow
def test_evaluate_reports_episodes_against_the_baselines(episodes):
    summary = json.loads((episodes / "metrics.json").read_text())
    for m in summary["rounds"]:
        for key in ("episode_return", "turnover", "drawdown", "mean_reward", "valid_rate"):
            lo, hi = m["greedy"][key]["ci95"]
            assert lo <= m["greedy"][key]["mean"] <= hi
    assert set(summary["baselines"]) == {"buy_and_hold", "equal_weight", "momentum"}
    assert summary["baselines"]["buy_and_hold"]["turnover"]["mean"] == 0  # bought at turn 1, never traded
    assert summary["baselines"]["equal_weight"]["turnover"]["mean"] > 0  # rebalanced back each turn
    assert set(summary["reward_minus_baseline"]["greedy"]) == {"buy_and_hold", "equal_weight", "momentum"}
    audit = json.loads((episodes / "audit.json").read_text())
    assert audit["train_to_test"]["embargo_periods"] >= 20  # the whole episode, not one turn
    # the plots the environment declares: equity curves, and no calibration (no single forecast to calibrate)
    assert (episodes / "equity_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert not (episodes / "calibration.png").exists()
