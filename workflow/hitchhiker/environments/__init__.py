"""Environments: what is domain-specific lives behind one small interface.

An environment has
  make_states(prices, cfg, fits, news) -> (states, outcomes)      build_states
  parse(completion, format, k) -> Action                         score, evaluate
  reward(action, forward_returns, reward_cfg) -> float           score, evaluate, summarize
  audit(prices, states, outcomes, cfg) -> report                 audit (raises on leakage)
  baselines(states) -> {name: weights per state}                 summarize
and is chosen by the config key ``environment``. Rollout, training and the Snakefile never
look inside one.
"""

from hitchhiker.environments.answers import Action
from hitchhiker.environments.market import Market
from hitchhiker.environments.synthetic import Synthetic

ENVIRONMENTS = {"market": Market, "synthetic": Synthetic}


def get(name: str):
    return ENVIRONMENTS[name]()


__all__ = ["ENVIRONMENTS", "Action", "get"]
