"""The answer contract: one grammar for every format, strict about content, and the reward to the cent."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hitchhiker.environments.market.answers import Action, parse, reward, score_many

SIMPLE = {"invalid_penalty": -0.05, "cost_bps": 0, "benchmark": "none", "returns": "simple"}


@pytest.mark.parametrize(
    "text, fmt, k, action, weights",
    [
        ("A", "pairwise", 2, "A", (1.0, 0.0)),
        ("  b. B's momentum is stronger", "pairwise", 2, "B", (0.0, 1.0)),
        ("A: higher recent returns", "pairwise", 2, "A", (1.0, 0.0)),
        ("A=0.7, B=0.3 since A trends", "pairwise", 2, "A=0.70,B=0.30", (0.7, 0.3)),
        ("a = .25 b=.75", "pairwise", 2, "A=0.25,B=0.75", (0.25, 0.75)),
        ("B=1", "pairwise", 2, "B=1.00", (0.0, 1.0)),
        ("A>B - stronger", "pairwise", 2, "A>B", (1.0, 0.0)),
        ("c", "listwise", 4, "C", (0.0, 0.0, 1.0, 0.0)),
        ("C > a > D > B: momentum", "listwise", 4, "C>A>D>B", (0.0, 0.0, 1.0, 0.0)),
        ("A=0.5, C=0.5", "listwise", 3, "A=0.50,C=0.50", (0.5, 0.0, 0.5)),
        ("Long, the trend is up", "elementwise", 1, "long", (1.0,)),
        ("\nSHORT - falling", "elementwise", 1, "short", (-1.0,)),
        ("flat", "elementwise", 1, "flat", (0.0,)),
        ("-0.5 half short", "elementwise", 1, "-0.50", (-0.5,)),
        ("+1", "elementwise", 1, "+1.00", (1.0,)),
        ("1. long, the trend", "elementwise", 1, "+1.00", (1.0,)),  # a stop and a space end the weight
        ("0.5.", "elementwise", 1, "+0.50", (0.5,)),
    ],
)
def test_parse_valid(text, fmt, k, action, weights):
    a = parse(text, fmt, k)
    assert a.valid and a.action == action and a.weights == pytest.approx(weights)


def test_a_ranking_keeps_its_order():
    assert parse("C>A>D>B", "listwise", 4).ranking == (2, 0, 3, 1)


@pytest.mark.parametrize(
    "text, fmt, k, reason",
    [
        ("", "pairwise", 2, "empty"),
        ("   \n", "pairwise", 2, "empty"),
        ("Answer: A", "pairwise", 2, "not_an_action"),
        ("AB", "pairwise", 2, "not_an_action"),
        ("C", "pairwise", 2, "unknown_label"),
        ("long", "pairwise", 2, "not_an_action"),
        ("A=0.7", "pairwise", 2, "bad_weights"),
        ("A=0.7, B=0.7", "pairwise", 2, "bad_weights"),
        ("A=1.5, B=-0.5", "pairwise", 2, "bad_weights"),
        ("A=0.5, A=0.5", "pairwise", 2, "bad_weights"),
        ("A=0.5, E=0.5", "listwise", 4, "unknown_label"),
        ("C>A>B", "listwise", 4, "bad_ranking"),
        ("C>A>A>B", "listwise", 4, "bad_ranking"),
        ("A", "elementwise", 1, "not_an_action"),
        ("longer", "elementwise", 1, "not_an_action"),
        ("42 long", "elementwise", 1, "bad_weights"),
        ("1.5", "elementwise", 1, "bad_weights"),
        ("1.stNLSs lseortM long{!ongst!?2nsY[", "elementwise", 1, "not_an_action"),  # noise, not a weight of 1
        ("-1.x", "elementwise", 1, "not_an_action"),
    ],
)
def test_parse_invalid_with_reason(text, fmt, k, reason):
    a = parse(text, fmt, k)
    assert not a.valid and a.invalid_reason == reason and a.action is None and a.weights == ()


def test_reward_worked_examples_to_the_cent():
    # $1 on A, A returns +3.2%, B -1.0%: the answer earns $0.032.
    assert reward(parse("A", "pairwise"), [0.032, -0.010], SIMPLE) == pytest.approx(0.032)
    assert reward(parse("B", "pairwise"), [0.032, -0.010], SIMPLE) == pytest.approx(-0.010)
    # short $1 of a stock that falls 4.5% earns $0.045; flat earns nothing; nonsense the penalty
    assert reward(parse("short", "elementwise"), [-0.045], SIMPLE) == pytest.approx(0.045)
    assert reward(parse("flat", "elementwise"), [-0.045], SIMPLE) == 0.0
    assert reward(parse("maybe", "elementwise"), [-0.045], SIMPLE) == -0.05


def test_reward_worked_example_of_the_docs():
    # answers.py's docstring: "A=0.7, B=0.3", r = (+4%, -2%), 10 bps a side, excess over equal weight
    a, r = parse("A=0.7, B=0.3", "pairwise"), [0.04, -0.02]
    cfg = {**SIMPLE, "cost_bps": 10, "benchmark": "equal_weight"}
    assert round(reward(a, r, {**SIMPLE, "cost_bps": 10}), 4) == 0.0200  # gross 0.022 - cost 0.002
    assert round(reward(a, r, cfg), 4) == 0.0100  # minus the equal-weight 0.010
    assert reward(a, r, {**cfg, "returns": "log"}) == pytest.approx(math.log(1.02) - math.log(1.01))
    assert round(reward(a, r, {**cfg, "returns": "log"}), 5) == 0.00985
    # a short pays costs on its absolute size; flat trades nothing and pays nothing
    assert reward(parse("-0.5", "elementwise"), [-0.10], {**SIMPLE, "cost_bps": 10}) == pytest.approx(0.049)
    assert reward(parse("flat", "elementwise"), [-0.10], {**SIMPLE, "cost_bps": 10}) == 0.0
    # an invalid answer earns the penalty whatever the options
    assert reward(parse("?", "pairwise"), r, {**cfg, "returns": "log"}) == -0.05


FORMATS = st.sampled_from([("elementwise", 1), ("pairwise", 2), ("listwise", 3), ("listwise", 5)])


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60), FORMATS)
def test_parse_never_raises_and_is_either_valid_or_has_a_reason(text, fk):
    fmt, k = fk
    a = parse(text, fmt, k)
    assert isinstance(a, Action)
    if a.valid:
        assert len(a.weights) == k and a.invalid_reason is None
        assert all(-1 <= w <= 1 for w in a.weights)
        if fmt != "elementwise":
            assert sum(a.weights) == pytest.approx(1.0, abs=0.0101) and min(a.weights) >= 0
    else:
        assert a.invalid_reason and a.weights == ()


ANSWER = st.one_of(
    st.sampled_from(["A", "B", "a", "b", "A>B", "B>A"]),
    st.floats(0, 1).map(lambda w: f"A={w:.3f}, B={1 - w:.3f}"),
)


@settings(max_examples=300, deadline=None)
@given(ANSWER, st.sampled_from(["", " ", "\n", "  \t"]), st.sampled_from(["", ". why", ", because", " reason"]))
def test_parse_is_tolerant_of_case_and_whitespace_only(answer, pad, rationale):
    assert parse(pad + answer + rationale, "pairwise").weights == parse(answer.upper(), "pairwise").weights
    assert parse(answer + rationale, "pairwise").valid
    assert not parse("x" + answer, "pairwise").valid


COMPLETION = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"\s*[a-eA-E](\s*[=>,]\s*[a-eA-E0-9.+-]{0,4}){0,4}[ .,;x]?.{0,5}", fullmatch=True),
    st.from_regex(r"\s*(long|FLAT|Short|[+-]?[0-9]?\.?[0-9]{0,3})[ .,x)]?.{0,5}", fullmatch=True),
)
REWARD_CFG = st.fixed_dictionaries(
    {
        "invalid_penalty": st.just(-0.05),
        "cost_bps": st.sampled_from([0, 5, 12.5]),
        "benchmark": st.sampled_from(["none", "equal_weight"]),
        "returns": st.sampled_from(["simple", "log"]),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(COMPLETION, FORMATS), min_size=1, max_size=40), REWARD_CFG, st.integers(0, 2**31))
def test_the_column_scorer_equals_parse_and_reward_row_by_row(rows, cfg, seed):
    rng = np.random.default_rng(seed)
    texts = [t for t, _ in rows]
    fmts = np.array([f for _, (f, _) in rows])
    k = np.array([kk for _, (_, kk) in rows])
    fwd = np.zeros((len(rows), 5))
    for i, kk in enumerate(k):
        fwd[i, :kk] = rng.normal(0, 0.05, kk)
    got = score_many(texts, fmts, fwd, k, cfg)
    for i, (text, (fmt, kk)) in enumerate(rows):
        a = parse(text, fmt, kk)
        action, reason = (None if pd.isna(x) else x for x in (got.action[i], got.invalid_reason[i]))
        assert (got.valid[i], action, reason) == (a.valid, a.action, a.invalid_reason), text
        assert list(got.weights[i]) == pytest.approx(list(a.weights))
        assert list(got.ranking[i]) == list(a.ranking)
        assert got.reward[i] == pytest.approx(reward(a, fwd[i, :kk], cfg), abs=1e-12)
