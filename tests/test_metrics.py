"""Evaluation statistics on hand-built cases with known answers."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import stage, tiny_config, write_config
from hitchhiker.environments.market import baselines, hallucination, prompts
from hitchhiker.environments.market.metrics import brier, calibration, paired_rank_ic, rank_ic, spearman
from hitchhiker.metrics import (
    BOOTSTRAP,
    Z,
    block_bootstrap_ci,
    block_bootstrap_median_ci,
    block_length,
    block_resamples,
    captured,
    decision_stats,
    max_drawdown,
    percentile_interval,
    portfolio_returns,
    series_bootstrap_ci,
    sharpe,
    t975,
)


def test_sharpe_by_hand():
    r = [0.01, -0.005, 0.02, 0.0]
    # mean 0.00625; squared deviations sum to 3.6875e-4; sample variance 1.2291667e-4
    per_period = 0.00625 / math.sqrt(3.6875e-4 / 3)
    assert sharpe(r, stride=5) == pytest.approx(per_period * math.sqrt(252 / 5))
    assert sharpe(r, stride=5) == pytest.approx(4.0019, abs=1e-3)
    assert math.isnan(sharpe([0.01, 0.01], stride=5))
    assert math.isnan(sharpe([-0.05] * 30, stride=5))  # every answer invalid: no Sharpe, not -1e17


def test_max_drawdown_by_hand():
    # equity 1.1, 0.88, 0.924, 0.8316, 1.08108: the deepest fall is 0.8316 from the 1.1 peak
    assert max_drawdown([0.10, -0.20, 0.05, -0.10, 0.30]) == pytest.approx(1 - 0.8316 / 1.1)
    assert max_drawdown([0.01, 0.02]) == 0.0
    assert max_drawdown([-0.5]) == pytest.approx(0.5)  # a loss from the start counts


def test_portfolio_averages_a_dates_decisions_and_scales_overlapping_horizons():
    dates = pd.to_datetime(["2020-01-02", "2020-01-02", "2020-01-03"])
    r = portfolio_returns([0.02, 0.04, -0.01], dates, horizon=5, stride=5)
    assert list(r) == pytest.approx([0.03, -0.01])
    r = portfolio_returns([0.02, 0.04, -0.01], dates, horizon=5, stride=1)  # 5 tranches at once
    assert list(r) == pytest.approx([0.006, -0.002])


def test_block_bootstrap_recovers_a_known_sampling_distribution():
    rng = np.random.default_rng(1)
    x = rng.normal(0.1, 1.0, 1000)
    dates = pd.date_range("2000-01-01", periods=1000)
    mean, lo, hi = block_bootstrap_ci(x, dates, block=1, seed=0)
    assert mean == pytest.approx(x.mean())
    assert lo < 0.1 < hi
    assert (hi - lo) / 2 == pytest.approx(1.96 / math.sqrt(1000), rel=0.12)


def test_block_bootstrap_widens_for_autocorrelated_outcomes():
    rng = np.random.default_rng(2)
    x = np.zeros(2000)
    for t in range(1, 2000):  # AR(1), phi = 0.8: the true standard error is 3x the iid one
        x[t] = 0.8 * x[t - 1] + rng.normal()
    dates = pd.date_range("2000-01-01", periods=2000)
    _, lo1, hi1 = block_bootstrap_ci(x, dates, block=1)
    _, lo20, hi20 = block_bootstrap_ci(x, dates, block=20)
    assert (hi20 - lo20) > 2 * (hi1 - lo1)


def test_decisions_on_one_date_are_resampled_together():
    dates = pd.date_range("2020-01-02", periods=4).repeat(3)
    mean, lo, hi = block_bootstrap_ci([1, 1, 1, 0, 0, 0] * 2, dates, block=1)
    # four dates: a resample's four dates are all 1s (or all 0s) 1/16 of the time; its
    # twelve decisions drawn one by one would be, 1/4096 of the time
    assert mean == 0.5 and lo == 0.0 and hi == 1.0


@pytest.mark.parametrize("n_dates, block", [(1, 1), (3, 3), (3, 5)])
def test_no_interval_from_one_block_of_dates_or_less(n_dates, block):
    """Every resample of one block is the series rotated: the same mean, the same median, the
    same Sharpe ratio, so the interval would have zero width. There is none instead."""
    dates = pd.date_range("2020-01-02", periods=n_dates).repeat(2)
    x = np.arange(2 * n_dates, dtype=float) - 1.5
    mean, lo, hi = block_bootstrap_ci(x, dates, block=block)
    assert mean == pytest.approx(x.mean()) and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(v) for v in block_bootstrap_median_ci(x, dates, block=block))
    assert all(math.isnan(v) for v in series_bootstrap_ci(x[::2], block, lambda r: sharpe(r, 1)))


def test_overlapping_horizons_resample_blocks_of_twice_the_overlap_and_every_interval_needs_four_blocks():
    assert [block_length(h, s) for h, s in [(5, 5), (1, 1), (3, 5), (9, 5), (20, 5), (5, 1)]] == [1, 1, 1, 4, 8, 10]
    x = np.random.default_rng(0).normal(size=40)
    for block, fewest in ((1, 4), (8, 32)):  # without overlap four dates; with it four blocks
        dates = pd.date_range("2020-01-02", periods=fewest)
        _, lo, hi = block_bootstrap_ci(x[:fewest], dates, block)
        assert lo < hi
        assert all(math.isnan(v) for v in block_bootstrap_ci(x[: fewest - 1], dates[:-1], block)[1:])
        assert all(math.isnan(v) for v in block_bootstrap_median_ci(x[: fewest - 1], dates[:-1], block))
        assert all(math.isnan(v) for v in series_bootstrap_ci(x[: fewest - 1], block, lambda r: sharpe(r, 1)))


def test_t975_matches_students_table():
    for df, t in ((3, 3.182), (4, 2.776), (5, 2.571), (10, 2.228), (30, 2.042), (1e9, 1.960)):
        assert t975(df) == pytest.approx(t, rel=2e-3)


def test_an_interval_is_the_percentile_interval_widened_by_t_and_kept_in_range():
    """With k blocks the percentile interval is widened about the resamples' median by
    t(k - 1) / z, sqrt(k / (k - 1)) and, with overlap, 1 / sqrt(captured), and never leaves
    the values the mean can take (benchmarks/coverage: unwidened, intervals held the truth
    85-95% of the time on 8-64 dates without overlap, and 65-85% on 16-32 dates in blocks of
    the overlap alone)."""
    x = np.random.default_rng(4).normal(size=32)
    dates = pd.date_range("2020-01-02", periods=32)
    assert [captured(overlap) for overlap in (1, 2, 4, 1000)] == pytest.approx([1, 7 / 8, 27 / 32, 5 / 6], rel=1e-3)
    # four blocks of twice an overlap of 4: 2.04; 32 dates without overlap: 1.06
    for block, widen in ((8, t975(3) / Z * math.sqrt(4 / 3 / captured(4))), (1, t975(31) / Z * math.sqrt(32 / 31))):
        _, lo, hi = block_bootstrap_ci(x, dates, block=block, seed=3)
        p_lo, mid, p_hi = np.percentile(x[block_resamples(32, block, 3, BOOTSTRAP)].mean(1), [2.5, 50, 97.5])
        assert (lo, hi) == pytest.approx((mid - (mid - p_lo) * widen, mid + (p_hi - mid) * widen))
    hits = np.r_[np.ones(30), 0, 0]  # a hit rate of 94%: widened, its interval would pass 1
    _, lo, hi = block_bootstrap_ci(hits, dates, block=8)
    assert 0 < lo < 30 / 32 and hi == 1.0
    assert percentile_interval(hits[block_resamples(32, 8, 0, BOOTSTRAP)].mean(1), 32, 8)[1] > 1
    for block, m in ((1, 6), (8, 32), (8, 48)):  # every answer invalid: -0.05 each
        # (CI's tiny run: six of them average to -0.049999999999999996, outside [-0.05, -0.05])
        mean, lo, hi = block_bootstrap_ci(np.full(m, -0.05), pd.date_range("2020-01-02", periods=m), block)
        assert lo <= mean <= hi and hi - lo < 1e-15, (block, m, lo, mean, hi)
    drawdowns = decision_stats(pd.DataFrame({"date": dates, "reward": x / 100}), horizon=20, stride=5)
    assert 0 <= drawdowns["max_drawdown"]["ci95"][0] <= drawdowns["max_drawdown"]["ci95"][1] <= 1


def test_decision_stats_fields():
    frame = pd.DataFrame(
        {
            "date": pd.to_datetime(["2020-01-02", "2020-01-09", "2020-01-16", "2020-01-23"]),
            "reward": [0.02, -0.01, 0.03, 0.0],
            "valid": [True, True, False, True],
            "correct": [1.0, 0.0, np.nan, 0.0],
        }
    )
    s = decision_stats(frame, horizon=5, stride=5)
    assert s["mean_reward"]["mean"] == pytest.approx(0.01)
    assert s["hit_rate"]["mean"] == pytest.approx(0.5)
    assert s["valid_rate"]["mean"] == pytest.approx(0.75) and s["accuracy"]["mean"] == pytest.approx(1 / 3)
    assert s["median_reward"]["median"] == pytest.approx(0.01)
    assert s["median_reward"]["ci95"][0] <= 0.01 <= s["median_reward"]["ci95"][1]
    assert s["max_drawdown"]["mean"] == pytest.approx(0.01)
    lo, hi = s["sharpe"]["ci95"]
    assert lo <= s["sharpe"]["mean"] <= hi


def test_an_invalid_answer_holds_cash_in_the_portfolio_but_keeps_its_penalty_in_the_mean_reward():
    dates = pd.bdate_range("2020-01-02", periods=40)
    nothing = pd.DataFrame({"date": dates, "reward": -0.05, "valid": False})
    s = decision_stats(nothing, horizon=1, stride=1)
    assert s["mean_reward"]["mean"] == pytest.approx(-0.05)  # the training signal, reported as such
    assert s["max_drawdown"]["mean"] == 0.0 and math.isnan(s["sharpe"]["mean"])  # no decision, no loss
    half = nothing.assign(reward=np.where(np.arange(40) % 2, 0.01, -0.05), valid=np.arange(40) % 2 == 1)
    assert s["max_drawdown"]["mean"] == decision_stats(half, 1, 1)["max_drawdown"]["mean"] == 0.0


def test_baselines_read_the_structured_history():
    states = pd.DataFrame(
        {
            "state_id": ["p", "e"],
            "date": pd.to_datetime(["2020-01-02", "2020-01-02"]),
            "shown_returns": [[[1.0, 2.0], [-1.0, 0.0]], [[-2.0, 1.0]]],  # A rose more; CCC's sum is negative
        }
    )
    sizes = [2, 1]
    w = {name: [tuple(r[:k]) for r, k in zip(v, sizes, strict=True)] for name, v in baselines.weights(states).items()}
    assert w["momentum"] == [(1.0, 0.0), (-1.0,)]
    assert w["mean_reversion"] == [(0.0, 1.0), (1.0,)]
    assert w["random"] == [(0.5, 0.5), (0.0,)] and w["always_first"] == [(1.0, 0.0), (1.0,)]
    assert w["equal_weight"] == [(0.5, 0.5), (1.0,)]
    outcomes = pd.DataFrame({"state_id": ["e", "p"], "forward_returns": [[0.03], [0.01, 0.05]]})
    cfg = {"cost_bps": 0, "benchmark": "none", "returns": "simple", "invalid_penalty": -1}
    got = baselines.rewards(states, outcomes, cfg).set_index(["baseline", "state_id"]).reward
    assert got["momentum", "p"] == pytest.approx(0.01) and got["momentum", "e"] == pytest.approx(-0.03)
    assert got["equal_weight", "p"] == pytest.approx(0.03) and got["random", "e"] == 0


def test_sharpe_interval_covers_the_truth_of_a_known_process():
    rng = np.random.default_rng(3)
    r = rng.normal(0.002, 0.01, 2000)  # true per-period Sharpe 0.2, annualised (stride 5) 0.2 * sqrt(50.4)
    lo, hi = series_bootstrap_ci(r, 1, lambda x: sharpe(x, 5), seed=0)
    assert lo < 0.2 * math.sqrt(252 / 5) < hi and hi - lo < 1.0
    lo, hi = series_bootstrap_ci(r, 1, max_drawdown, seed=0)
    assert 0 <= lo <= max_drawdown(r) <= hi


def test_spearman_by_hand():
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    # ranks (1, 2, 3, 4) vs (2, 1, 4, 3): d^2 sums to 4, rho = 1 - 6 * 4 / (4 * 15) = 0.6
    assert spearman([1, 2, 3, 4], [0.2, 0.1, 0.4, 0.3]) == pytest.approx(0.6)
    assert math.isnan(spearman([0.5, 0.5], [0.1, 0.2]))  # an even split prefers nothing


def _answers():
    d1, d2 = pd.Timestamp("2020-01-02"), pd.Timestamp("2020-01-09")
    return pd.DataFrame(
        {
            "state_id": [f"s{i}" for i in range(7)],
            "date": [d1, d1, d2, d2, d1, d1, d1],
            "format": ["pairwise", "pairwise", "listwise", "pairwise", "elementwise", "elementwise", "elementwise"],
            "valid": [True, True, True, False, True, True, True],
            "weights": [[1.0, 0.0], [0.7, 0.3], [0.0, 0.0, 1.0], [], [1.0], [-0.5], [0.0]],
            "preference": [[1.0, 0.0], [0.7, 0.3], [2.0, 1.0, 3.0], [], [1.0], [-0.5], [0.0]],
            "forward_returns": [[0.02, 0.01], [-0.01, 0.03], [0.01, -0.02, 0.05], [0.1, 0.0], [0.03], [-0.01], [0.01]],
        }
    )


def test_rank_ic_by_hand():
    ic = rank_ic(_answers())
    # right pair +1, wrong pair -1, ranking C>A>B with returns C>A>B +1, the invalid answer
    # nothing; the three elementwise answers of one date: positions (1, -0.5, 0) against
    # returns (0.03, -0.01, 0.01) rank identically, +1
    assert sorted(ic.tolist()) == pytest.approx([-1.0, 1.0, 1.0, 1.0])


def test_paired_rank_ic_by_hand():
    base = _answers()  # ICs: s0 +1, s1 -1, s2 (listwise) +1, s3 invalid, the elementwise date d1 +1
    cur = pd.concat([_answers(), _answers().iloc[[0]]], ignore_index=True)
    cur.at[7, "preference"] = [0.0, 1.0]  # a second answer for s0, the wrong one: s0's mean IC 0
    cur.at[1, "preference"] = [0.3, 0.7]  # s1 now right: +1
    cur.at[2, "preference"] = [1.0, 2.0, 3.0]  # ranks (1, 2, 3) against returns' (2, 1, 3): 1 - 6 * 2 / 24 = 0.5
    cur.at[4, "preference"], cur.at[5, "preference"] = [-1.0], [0.5]  # (-1, 0.5, 0) against (0.03, -0.01, 0.01): -1
    cur.at[3, "preference"], cur.at[3, "weights"], cur.at[3, "valid"] = [1.0, 0.0], [1.0, 0.0], True  # base has none
    got = paired_rank_ic(cur, base, horizon=1, stride=1)
    # s0 0 - 1, s1 1 - (-1), s2 0.5 - 1, d1 -1 - 1; s3 unpaired
    assert got["n"] == 4 and got["mean"] == pytest.approx((-1 + 2 - 0.5 - 2) / 4)
    assert all(math.isnan(v) for v in got["ci95"])  # on two dates: too few for an interval


def test_brier_and_calibration_by_hand():
    b = brier(_answers())
    # A=1 and A wins: 0; A=0.7 but B wins: (0.7^2 + 0.7^2) / 2 = 0.49; listwise all on C, C
    # wins: 0; elementwise: (1 - 1)^2 = 0, (0.25 - 0)^2 = 0.0625, (0.5 - 1)^2 = 0.25
    assert sorted(b.round(6).tolist()) == [0.0, 0.0, 0.0, 0.0625, 0.25, 0.49]
    table = {tuple(row["bin"]): row for row in calibration(_answers())}
    assert table[(0.8, 1.0)]["n"] == 3 and table[(0.8, 1.0)]["observed"] == 1.0  # 1.0, 1.0 (C), p_up 1.0
    assert table[(0.6, 0.8)] == {"bin": [0.6, 0.8], "n": 1, "forecast": 0.7, "observed": 0.0}


# the prompt of the cases below: A (AAPL) showed +0.07 -1.29 +1.30 -0.60 +1.46
HALLUCINATION_PROMPT = prompts.render(
    "pairwise", ["AAPL", "MSFT"], np.array([[0.0007, -0.0129, 0.013, -0.006, 0.0146], [0.01, 0.02, -0.01, 0, 0.005]]), 5
)


HALLUCINATION_CASES = [
    # percent claims: supported by a shown or compounded return, or not
    ("A because AAPL rose 1.46% yesterday", {"claims": 1}),
    ("A, up 0.85% in two days", {"claims": 1}),  # (1 + 0.0146)(1 - 0.006) - 1, compounded
    ("B: MSFT -1.00% then +0.5%", {"claims": 2}),
    ("A rose 7%", {"claims": 1, "unsupported": 1}),
    ("A: Previous answer: A returns more than 10% over the next 5 trading days.", {"claims": 1, "unsupported": 1}),
    # figures recited as shown (SmolLM2 recites invented ones), cut-off last numbers skipped
    ("A: +0.07 -1.29 +1.30 -0.60 +1.46", {"figures": 4}),
    ("A: +3.5 +1.4 +2.9 +1.9 + 3.5", {"figures": 4, "figure": 4}),
    ("A: +0.25 +2.01 -0.90 +1.36 -0", {"figures": 4, "figure": 4}),
    ("A: 1.29 1.3", {"figures": 1}),  # unsigned, at the precision written
    ("A=0.5, B=0.5 because", {}),  # listwise weights are not figures
    # arithmetic on figures (its operands are figures too)
    ("A: +0.13 +1.44 = +0.25\nB", {"arithmetic": 1, "figures": 2, "figure": 2}),
    ("A: +\t1 +2 = 7, B", {"arithmetic": 1}),  # a sign parted from its figure by a tab
    ("A: 1.84 -1.22 = 1.08, which is exactly 1", {"arithmetic": 1, "figures": 2, "figure": 2}),
    ("A: +0.07 -1.29 = -1.22 so", {"figures": 2}),
    ("+1.30 - 0.60 = 5.20%", {"arithmetic": 1, "claims": 1, "figures": 2, "unsupported": 1}),
    # labels bound to another of the state's tickers
    ("A (MSFT): +1.00", {"label": 1}),
    ("MSFT (A) rises", {"label": 1}),
    ("A (AAPL): +0.07 -1.29 +1.30 -0.60 +1.46", {"figures": 4}),
    ("Asked by a user.\nA (MISC): -1.29", {"unknown_ticker": 1}),  # not in the state: unknown
    # periods the prompt does not show
    ("A, it rose on Monday and on 2021-03-04", {"day": 2}),
    ("A: over the last 10 days", {"day": 1}),
    ("A, over the past 5 trading days", {}),
    ("A will return more over the next 5 trading days, specifically in the previous 2 trading days.", {}),
    ("A, it beat B over the last 2 weeks", {"day": 1}),
    # unknown tickers, once per distinct word
    ("A beats TSLA and NVDA, and TSLA again", {"unknown_ticker": 2}),
    ("A, as US GDP grows", {}),
    ("M]ijortnsA to toTortor7y", {}),
]


@pytest.mark.parametrize("completion, found", HALLUCINATION_CASES)
def test_hallucination_rules_on_smollm2_style_completions(completion, found):
    got = hallucination.check(completion, HALLUCINATION_PROMPT, ["AAPL", "MSFT"])
    assert got._asdict() == {**dict.fromkeys(hallucination.Claims._fields, 0), **found}
    assert hallucination.count(completion, HALLUCINATION_PROMPT, ["AAPL", "MSFT"]) == sum(
        v for k, v in found.items() if k not in ("claims", "figures")
    )


def test_indicators_tell_fewer_claims_from_writing_less():
    # supported = stated (percents and checked figures) - unsupported of those two kinds
    texts = ["A: +0.07 -1.29 +1.30 -0.60 +1.46", "A: +3.5 +1.4 +2.9 +1.9 + 3.5", "A rose 7% and 1.46%", "A", None]
    frame = hallucination.check_many(texts, [HALLUCINATION_PROMPT] * 5, [["AAPL", "MSFT"]] * 5).assign(completion=texts)
    totals = hallucination.with_totals(frame)
    assert totals["supported_claims"].tolist() == [4, 0, 1, 0, 0]
    assert totals["unsupported_claims"].tolist() == [0, 4, 1, 0, 0]
    got = hallucination.indicators(frame)
    assert got["unsupported_per_answer"].tolist() == [0, 4, 1, 0, 0]
    assert got["supported_per_answer"].tolist() == [4, 0, 1, 0, 0]
    assert got["stating_figures_rate"].tolist() == [1, 1, 1, 0, 0]
    assert got["completion_chars"].tolist() == [len(t or "") for t in texts]


def test_a_batch_of_completions_is_checked_each_on_its_own():
    # check_many scans the completions joined by a NUL: no claim may reach across the join
    # (a sum, a figure's look-ahead, "the last number"), in either order, next to an empty
    # text or one that holds a NUL itself
    texts = [c for c, _ in HALLUCINATION_CASES]
    other = prompts.render("pairwise", ["MSFT", "AAPL"], np.full((2, 3), 0.02), 5)
    for batch in (texts, texts[::-1], [*texts, "", "A\x00 rose 7%", "1.5"]):
        shown = [HALLUCINATION_PROMPT if i % 2 else other for i in range(len(batch))]
        pairs = [["AAPL", "MSFT"] if i % 2 else ["MSFT", "AAPL"] for i in range(len(batch))]
        got = hallucination.check_many(batch, shown, pairs)
        alone = [hallucination.check(c, p, t)._asdict() for c, p, t in zip(batch, shown, pairs, strict=True)]
        assert got.to_dict("records") == alone


# pieces of text that each rule's pattern (and its look-arounds) reacts to, and characters
# where Python's re and RE2 disagree (Unicode digits, letters and spaces, \x1c, \v, a NUL)
CLAIM_PIECES = st.sampled_from(
    [
        *"%+-.=()^_ \t\n\x0b\x0c\x1c\x00AaBbZ0123456789",
        "AAPL",
        "MSFT",
        "BRK.B",
        "FDA",
        "AB",
        "A (MSFT)",
        "MSFT(A)",
        "Monday",
        "sUNDAY",
        "March 4",
        "March",
        "2021-03-04",
        "1999-1-1",
        "last",
        "Past",
        "previous 12",
        "days",
        "weeks",
        "trading",
        "1.46",
        "+0.07",
        "-1.29",
        "7",
        "0.85",
        "= ",
        "\u0663",
        "\u0663.\u0664",
        "\u00e9",
        "\u212a",
        "\u017f",
        "\u00a0",
        "\u2009",
        "\uff10",
        "Past 7 days",
        "LAST 30 DAYS",
        "last\x1c9\x0bweeks",
        "A\x1c(MSFT)",
        "MSFT\x0b(A)",
        "1 +2\x1c= 4",
        "+0.13 +1.44 = +0.25",
    ]
)
CLAIM_TEXT = st.one_of(st.lists(CLAIM_PIECES, max_size=5).map("".join), st.text(max_size=12), st.none())


@settings(max_examples=1000, deadline=None)
@given(st.lists(CLAIM_TEXT, min_size=1, max_size=12))
def test_the_claim_prefilter_never_skips_a_claim(texts):
    # check_many runs Python's rules only where RE2's superset pattern matches, each rule only
    # where its own does (alone or scanning the whole batch); the counts must equal the rules
    # run on every completion
    shown = [HALLUCINATION_PROMPT] * len(texts)
    pairs = [["AAPL", "MSFT"]] * len(texts)
    every = hallucination._check(["" if t is None else t for t in texts], shown, pairs)  # no masks: every text
    assert hallucination.check_many(texts, shown, pairs).to_dict("records") == every.to_dict("records")


def test_hallucination_reads_the_data_frequency_for_lookbacks():
    rets = np.full((2, 6), 0.01)
    monthly = prompts.render_batch("pairwise", np.array([["AAPL", "MSFT"]]), {"returns": rets[None]}, 1, freq="monthly")
    prompt = monthly[0].as_py()
    assert hallucination.check("A, up over the last 6 months", prompt, ["AAPL", "MSFT"]).day == 0
    assert hallucination.check("A, up over the last 100 days", prompt, ["AAPL", "MSFT"]).day == 0  # < 6 x 21
    assert hallucination.check("A, up over the past 2 years", prompt, ["AAPL", "MSFT"]).day == 1


def test_one_evaluated_date_is_reported_without_an_interval(tmp_path, base_run):
    """evaluate.max_states: 1 through evaluate and summarize, as the DAG runs them: the means
    are there, their intervals are null in the JSON and "[too few dates]" in the table."""
    cfg = write_config(tmp_path / "c.yaml", tiny_config(evaluate={"max_states": 1, "samples_per_state": 2}))
    data = ["--states", base_run / "states.parquet", "--outcomes", base_run / "outcomes.parquet"]
    stage("evaluate", "--config", cfg, "--round", "0", *data, "--policy", base_run / "policy" / "round_0",
          "--predictions", tmp_path / "p0.parquet", "--metrics", tmp_path / "m0.json")  # fmt: skip
    greedy = json.loads((tmp_path / "m0.json").read_text())["greedy"]
    assert greedy["n"] == 1 and greedy["mean_reward"]["mean"] is not None
    assert greedy["mean_reward"]["ci95"] == greedy["valid_rate"]["ci95"] == [None, None]
    out = tmp_path / "out"
    proc = stage("summarize", "--config", cfg, *data, "--predictions", tmp_path / "p0.parquet",
                 "--metrics", tmp_path / "m0.json", "--out-json", out / "metrics.json", "--out-plot", out / "c.png",
                 "--out-env-plots", out / "equity_curves.png", out / "calibration.png", "--out-invalid", out / "i.png",
                 "--out-headline", out / "headline.csv")  # fmt: skip
    table = (out / "headline.csv").read_text()
    assert table.count("[too few dates]") == 8 and "[too few dates]" in proc.stdout, table  # 4 figures, 2 modes
