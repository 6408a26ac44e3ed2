"""The Environment base class: what a minimal environment gets without writing it."""

import numpy as np
import pandas as pd
import pytest

from conftest import tiny_config
from hitchhiker import config, environments
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.base import Environment


class Minimal(Environment):
    name = "minimal"


def test_a_minimal_environment_gets_a_default_for_every_method_but_the_three_it_must_write():
    env = Minimal()
    methods = [
        ("fetch", ({},)),
        ("make_states", (None, {}, None)),
        ("audit", (None, None, None, {})),
        ("score", (None,) * 4),
    ]
    for method, args in methods:
        with pytest.raises(NotImplementedError, match=f"minimal environment has no {method}"):
            getattr(env, method)(*args)
    env.check_config({})
    env.check_data(pd.DataFrame(), {})
    assert env.next_turn(None, ["A"], {}) is None  # one decision per state
    assert env.answer_metrics(pd.DataFrame(), 1, 0) == {}
    none = env.baselines(pd.DataFrame(), pd.DataFrame(), {}, train=pd.DataFrame())
    assert none.empty and none.columns.tolist() == ["baseline", "state_id", "date", "reward"]
    rates = env.claim_rates(pd.DataFrame({"unsupported_claims": [0, 2]}))
    assert rates.to_dict("list") == {"any_rate": [0.0, 1.0], "unsupported_per_answer": [0.0, 2.0]}
    assert env.corpus({}, 0) == []  # the tiny tokenizer keeps its alphabet
    assert not env.prices_actions()
    with pytest.raises(HitchhikerError, match="minimal environment does not price every action"):
        env.action_rewards(pd.DataFrame(), {})
    with pytest.raises(HitchhikerError, match=r"model\.tiny\.format_warmup_steps: the minimal environment"):
        env.practice_turn({}, np.random.default_rng(0), 0)


def test_practice_turns_make_the_default_corpus():
    class Practised(Minimal):
        def practice_turn(self, cfg, rng, i):
            return f"Will it rain on day {i}?", ["yes", "no"]

    texts = Practised().corpus({}, 0)
    assert texts[:3] == ["Will it rain on day 0?", "yes because", "no because"] and len(texts) == 600


def test_the_shipped_environments_are_subclasses_and_only_the_single_turn_ones_price_actions():
    shipped = {name: environments.get(name) for name in environments.ENVIRONMENTS}
    assert all(isinstance(env, Environment) and env.name == name for name, env in shipped.items())
    assert {name for name, env in shipped.items() if env.prices_actions()} == {"market", "synthetic", "weather"}
    cfg = tiny_config(
        environment="sequential", states={**tiny_config()["states"], "horizon": 4}, market={"states": {"turns": 2}}
    )
    with pytest.raises(HitchhikerError, match=r"train\.objective = full_information: the sequential environment"):
        config.validate({**cfg, "train": {**cfg["train"], "objective": "full_information"}})
