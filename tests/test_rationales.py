"""The reason measures on hand-written answers: a copied template, an inconsistent reason, a
consistent one, a policy that ignores its prompt; in the weather and the market, through
each environment's score, counterfactual and follows as evaluate calls them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import tiny_config
from hitchhiker import config, environments, rationales
from hitchhiker.environments import weather_reasons
from hitchhiker.environments.weather import FLIPPED_RAIN_MM

WEATHER = environments.get("weather")
REWARD = {"benchmark": "none", "cost_bps": 0, "invalid_penalty": -0.05, "returns": "simple"}


def said(*completions) -> pd.DataFrame:
    return pd.DataFrame({"completion": list(completions)})


def test_a_recited_template_is_one_reason_whatever_its_figures():
    template = said(*[f"A: +{i}.25 -{i}.01 +0.9{i}" for i in range(9)], "B because A fell 2% today")
    rates = rationales.indicators(template)
    assert rates["template_rate"].mean() == pytest.approx(0.9)
    assert rationales.summary(template.completion) == {"distinct_reasons": pytest.approx(20.0), "template": "# # #"}


def test_varied_reasons_are_no_template_and_a_bare_answer_has_no_reason():
    varied = said("yes because it rained 3 days", "no because today was dry", "no", "yes: wet and windy")
    rates = rationales.indicators(varied)
    assert rates["no_reason_rate"].tolist() == [0, 0, 1, 0]
    assert rates["template_rate"].sum() == 1  # a tie of ones: one reason, the first in sorted order
    assert rationales.summary(varied.completion)["distinct_reasons"] == pytest.approx(75.0)


def test_a_repetition_is_one_template_whatever_its_length():
    """SmolLM2's degenerate "no because no no no ..." runs until max_new_tokens cuts it, at
    lengths that vary: counted once, its repeats are one template."""
    loops = [f"no because{' no' * k}" for k in range(1, 7)] + [
        "no because no because no",
        "yes because no because no no",
    ]
    looping = said(*loops, "yes it rained")
    assert rationales.indicators(looping)["template_rate"].tolist() == [1.0] * 8 + [0.0]
    assert rationales.summary(looping.completion) == {
        "distinct_reasons": pytest.approx(200 / 9),
        "template": "because no",
    }
    # a word said twice apart, or inside another, is no repetition
    assert rationales.templates(pd.Series(["A rain then rain", "A the theory theory", "A a b a b c"])).tolist() == [
        "rain then rain",
        "the theory",
        "a b c",
    ]


def test_a_policy_that_answers_without_reasons_has_no_template():
    bare = said("A", "A", " A ", None)
    assert rationales.indicators(bare)["template_rate"].sum() == 0
    assert rationales.summary(bare.completion) == {"distinct_reasons": 0.0, "template": None}


# -- the weather ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def weather():
    cfg = tiny_config(run="weather", environment="weather")
    cfg["states"] = {
        "horizon": 1,
        "window": 4,
        "stride": 1,
        "train": {"start": "2012-01-01", "end": "2012-12-31", "max_states": 8},
        "test": {"start": "2013-03-01", "end": "2013-12-30", "max_states": 60},
    }
    cfg = config.validate(cfg)
    table, _ = WEATHER.fetch(cfg)
    states, outcomes = WEATHER.make_states(table, cfg, lambda texts, budget: np.ones(len(texts), bool))
    test = states["split"] == "test"
    return cfg, states[test].reset_index(drop=True), outcomes[test].reset_index(drop=True)


def scored(env, answers: list[str], states, outcomes) -> pd.DataFrame:
    samples = pd.DataFrame({"state_id": states["state_id"], "sample_idx": 0, "completion": answers})
    return pd.concat([samples, env.score(samples, states, outcomes, REWARD)], axis=1)


def today_wet(states) -> np.ndarray:
    return states["rain_today"].to_numpy(dtype=bool)


def test_weather_consistent_inconsistent_and_unargued_reasons(weather):
    _, states, outcomes = weather
    wet = today_wet(states)
    consistent = ["yes, it rained today" if w else "no, today was dry" for w in wet]
    inconsistent = ["no, it rained today" if w else "yes, today was dry" for w in wet]
    false = ["yes, it rained today" if not w else "no, today was dry" for w in wet]  # argues, but untrue
    recital = [f"yes {p.splitlines()[-2]}" for p in states["prompt"]]  # today's line copied
    for answers, consistency, supported in [(consistent, 1, 1), (inconsistent, -1, 1), (false, 1, 0)]:
        got = scored(WEATHER, answers, states, outcomes)
        assert (got["reason_consistency"] == consistency).all()
        assert (got["reason_supported"] == supported).all()
        assert (got["rain_statement"] == 1 - supported).all() and (got["unsupported_claims"] == 1 - supported).all()
        # the reason bonus pays no false one, and charges a reason against its own answer in
        # full; the consistent, supported one is one of two reasons every answer gives: a
        # template, paid nothing (the varied ones are paid: the test below)
        assert (rationales.paid(got) == min(consistency, 0)).all()
    # today's line recited: true, checked, a template on every answer, and no argument
    got = scored(WEATHER, recital, states, outcomes)
    assert (got["reason_consistency"] == 0).all() and (got["unsupported_claims"] == 0).all()
    assert (got["reason_supported"] == 1).all() and rationales.paid(got).max() == 0
    rates = rationales.indicators(got)
    assert rates["template_rate"].mean() == 1 and rates["no_argument_rate"].mean() == 1
    # a recital with its rain changed does not hold; an argument beside a recital still argues
    flipped = [f"yes {p.splitlines()[-2].replace(' mm', '1 mm', 1)}" for p in states["prompt"]]
    assert (scored(WEATHER, flipped, states, outcomes)["reason_supported"] == 0).any()
    both = [f"{r}. it rained today" if w else f"{r}. today was dry" for r, w in zip(recital, wet, strict=True)]
    assert (scored(WEATHER, both, states, outcomes)["reason_consistency"] == np.where(wet, 1, -1)).all()
    bare = scored(WEATHER, ["yes"] * len(states), states, outcomes)  # no reason: argues nothing
    assert rationales.indicators(bare)["no_argument_rate"].mean() == 1


def test_weather_claims_a_figure_a_day_and_a_sum_the_prompt_does_not_show(weather):
    _, states, outcomes = weather
    prompt = states["prompt"].iloc[0]
    shown = [float(line.split("rain ")[1].split(" mm")[0]) for line in prompt.splitlines()[1:-1]]
    a, b = shown[-2:]
    answers = [
        "yes, it rained 97.3 mm today",  # a figure not shown (and a wrong statement if today was dry)
        f"no, {a:.1f} + {b:.1f} = {a + b + 5:.1f} mm in two days",  # wrong arithmetic
        "yes, it rained on Sunday and last 12 days were wet",  # more days than shown
        f"no, {a:.1f} + {b:.1f} = {a + b:.1f} mm",  # right arithmetic, shown figures
    ]
    got = scored(WEATHER, answers, states.iloc[[0] * 4].reset_index(drop=True), outcomes.iloc[[0] * 4])
    assert got["figure"].tolist()[0] == 1 and got["arithmetic"].tolist()[:2] == [0, 1]
    assert got["day"].tolist()[2] >= 1
    assert got["unsupported_claims"].tolist()[3] == 0


def test_a_template_earns_no_reason_bonus_and_a_varied_supported_reason_does(weather):
    _, states, outcomes = weather
    wet = today_wet(states)
    template = scored(WEATHER, ["yes, it rained today"] * len(states), states, outcomes)
    assert rationales.paid(template).max() == 0  # every answer gives it: nothing paid, true or not
    days = {True: "rained", False: "was dry"}
    varied = [
        f"{'yes' if w else 'no'}, it {days[bool(w)]} on a {d:%A} in {d:%B}"
        for w, d in zip(wet, states["date"], strict=True)
    ]
    got = scored(WEATHER, varied, states, outcomes)
    assert (got["reason_consistency"] == 1).all() and (got["reason_supported"] == 1).all()
    # seven weekdays x ten months x two words: each reason one or two of the 60 answers, paid 1 - share / 0.1
    said = rationales.reasons(got["completion"])
    share = said.map(said.value_counts(normalize=True))
    assert rationales.paid(got).tolist() == pytest.approx((1 - share / rationales.PAID_SHARE).tolist())
    assert rationales.paid(got).min() > 0  # none is one answer in ten
    # a reason one answer in ten gives, or more, earns nothing, however true; one under a
    # tenth still earns something
    for k, earns in [(-(-len(states) // 10), False), (len(states) // 10 - 1, True)]:
        common = np.flatnonzero(wet)[:k]
        assert len(common) == k
        got = scored(
            WEATHER, ["yes, it rained today" if i in common else v for i, v in enumerate(varied)], states, outcomes
        )
        assert (rationales.paid(got).iloc[common] > 0).all() == earns and (rationales.paid(got).iloc[common] >= 0).all()


def test_the_weathers_changed_prompt_moves_a_reader_and_not_a_policy_that_ignores_it(weather):
    cfg, states, outcomes = weather
    changed = WEATHER.counterfactual(states, cfg)
    assert (changed["rain_today"] == ~states["rain_today"]).all()
    assert (changed["rain_today_mm"] == np.where(states["rain_today"], 0.0, FLIPPED_RAIN_MM)).all()
    assert (changed["state_id"] == states["state_id"]).all()
    for before, after in zip(states["prompt"], changed["prompt"], strict=True):
        b, a = before.splitlines(), after.splitlines()
        assert b[:-2] == a[:-2] and b[-1] == a[-1] and b[-2] != a[-2]  # only today's line changes
    ref = [weather_reasons.shown(p).rain[-1] > 0 for p in changed["prompt"]]
    assert ref == (~states["rain_today"]).tolist()

    def answer(frame):
        return ["yes" if w else "no" for w in frame["rain_today"]]

    persistence = WEATHER.follows(
        scored(WEATHER, answer(states), states, outcomes), scored(WEATHER, answer(changed), changed, outcomes), changed
    )
    assert (persistence == 1).all()
    always_yes = scored(WEATHER, ["yes"] * len(states), states, outcomes)
    ignores = WEATHER.follows(always_yes, scored(WEATHER, ["yes"] * len(states), changed, outcomes), changed)
    assert (ignores == 0).all()
    invalid = scored(WEATHER, ["maybe"] * len(states), changed, outcomes)
    assert WEATHER.follows(always_yes, invalid, changed).isna().all()


# -- the market -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def market():
    env = environments.get("synthetic")
    cfg = tiny_config(run="synthetic", environment="synthetic")
    cfg["market"]["states"] = {"formats": ["pairwise"], "per_date": 4}
    cfg["states"]["train"]["max_states"] = 8
    cfg["states"]["test"]["max_states"] = 40
    cfg = config.validate(cfg)
    table, _ = env.fetch(cfg)
    states, outcomes = env.make_states(table, cfg, lambda texts, budget: np.ones(len(texts), bool))
    test = (states["split"] == "test").to_numpy()
    return env, cfg, states[test].reset_index(drop=True), outcomes[test].reset_index(drop=True)


def totals(prompt: str) -> np.ndarray:
    from hitchhiker.environments.market import prompts

    return np.array([np.prod(1 + r / 100) for r in prompts.section_returns(prompts.shown(prompt))])


def test_market_reasons_consistent_inconsistent_a_template_and_a_policy_that_ignores_the_prompt(market):
    env, cfg, states, outcomes = market
    a_rose_more = np.array([t[0] > t[1] for t in map(totals, states["prompt"])])
    reader = ["A, A rose more than B" if up else "B, B rose more than A" for up in a_rose_more]
    inconsistent = ["B, A rose more than B" if up else "A, B rose more than A" for up in a_rose_more]
    got = scored(env, reader, states, outcomes)
    assert (got["reason_consistency"] == 1).all() and (got["reason_supported"] == 1).all()
    got = scored(env, inconsistent, states, outcomes)
    assert (got["reason_consistency"] == -1).all() and (got["reason_supported"] == 1).all()
    rates = rationales.indicators(got)
    assert rates["inconsistent_rate"].mean() == 1 and rates["supported_reason_rate"].mean() == 0
    recital = [f"A: {p.splitlines()[2].split(': ', 1)[1]}" for p in states["prompt"]]  # A's shown returns
    got = scored(env, recital, states, outcomes)
    assert (got["reason_consistency"] == 0).all()
    assert rationales.indicators(got)["template_rate"].mean() == 1  # every figure true, one reason
    # the swap: a reader's pick follows its ticker to the other label, an always-A policy's does not
    changed = env.counterfactual(states, cfg)
    assert (changed["state_id"] == states["state_id"]).all()
    assert [list(t) for t in changed["tickers"]] == [list(t)[::-1] for t in states["tickers"]]
    swapped = np.array([t[0] > t[1] for t in map(totals, changed["prompt"])])
    assert (swapped == ~a_rose_more).all()  # (no ties on the synthetic prices)
    reader_changed = ["A" if up else "B" for up in swapped]
    follows = env.follows(
        scored(env, reader, states, outcomes), scored(env, reader_changed, changed, outcomes), changed
    )
    assert (follows == 1).all()
    always_a = scored(env, ["A"] * len(states), states, outcomes)
    assert (env.follows(always_a, scored(env, ["A"] * len(states), changed, outcomes), changed) == 0).all()


REASON_PIECES = st.sampled_from(
    ["A", "B", " ", ", ", ". ", " than ", "AAPL", "MSFT", " rose", " ROSE", " Fell", " gained", " momentum",
     " weaker", " will", " today", " it", " and ", "up", "Up", "\u212a", "\u00e9", "\u0130", "\n", "1.2%", "lost"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.lists(REASON_PIECES, max_size=8).map("".join), st.none()), min_size=1, max_size=10))
def test_the_reasons_prefilter_reads_every_answer_that_could_argue(texts):
    # check_many reads only the answers whose text has a direction word (RE2's scan over the
    # column); its results must equal reading every answer
    from hitchhiker.environments.market import prompts, reasons

    prompt = prompts.render("pairwise", ["AAPL", "MSFT"], np.array([[0.01, -0.02, 0.013], [0.0, 0.02, -0.01]]), 3)
    n = len(texts)
    valid = np.array([i % 3 != 2 for i in range(n)])
    weights = [[1.0, 0.0] if i % 2 else [0.0, 1.0] for i in range(n)]
    formats = ["pairwise" if i % 4 else "listwise" for i in range(n)]
    got = reasons.check_many(texts, [prompt] * n, [["AAPL", "MSFT"]] * n, weights, valid, formats)
    every = [
        reasons._argued(t, prompt, ["AAPL", "MSFT"], w, ok) if f == "pairwise" else (np.nan, np.nan)
        for t, w, ok, f in zip(texts, weights, valid, formats, strict=True)
    ]
    assert np.array_equal(got.to_numpy(), np.array(every, dtype=float).reshape(n, 2), equal_nan=True)


TICKER = st.text(alphabet="ABCKLMS1", min_size=1, max_size=4)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(TICKER, min_size=1, max_size=3, unique=True),
    st.lists(st.one_of(TICKER, st.sampled_from([" ", ".", "-", "_", "(", "\u00e9", "\u212a", "x"])), max_size=10),
)
def test_a_clause_names_the_tickers_the_states_own_pattern_finds(names, pieces):
    # plain tickers are found among the clause's word runs, without compiling the state's
    # pattern; they must be where that pattern, \b(A|B|name|...)\b, finds them
    import re

    from hitchhiker.environments.market import reasons

    labels = [chr(ord("A") + i) for i in range(len(names))]
    clause = "".join(pieces)
    tokens = [*labels, *names]
    who = re.compile(r"\b(" + "|".join(map(re.escape, tokens)) + r")\b")
    assert reasons._mentions(clause, labels, names) == [(m.start(), tokens.index(m[1])) for m in who.finditer(clause)]
