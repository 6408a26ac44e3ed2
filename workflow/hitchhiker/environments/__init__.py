"""Environments: what is domain-specific lives behind one class, chosen by the config key
``environment``. Stages call only the methods of :class:`~hitchhiker.environments.base.Environment`,
through :func:`get`; none imports an environment's modules, so a new environment is a
subclass (make_states, audit and score; base.py has a default for the rest) and an entry
in ENVIRONMENTS, with no change to rollout, score, training, evaluation or the Snakefile.
"""

from __future__ import annotations

from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.base import Environment
from hitchhiker.environments.market import Market
from hitchhiker.environments.sequential import Sequential
from hitchhiker.environments.synthetic import simulated_closes

ENVIRONMENTS: dict[str, Environment] = {
    "market": Market("market"),
    "synthetic": Market("synthetic", closes=simulated_closes),
    "sequential": Sequential(),
}


def get(name: str) -> Environment:
    if name not in ENVIRONMENTS:
        raise HitchhikerError(f"config key environment = {name!r}: not one of {', '.join(ENVIRONMENTS)}")
    return ENVIRONMENTS[name]


__all__ = ["ENVIRONMENTS", "Environment", "get"]
