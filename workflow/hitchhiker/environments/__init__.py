"""Environments: what is domain-specific lives behind one class, chosen by the config key
``environment``. Stages call only the methods of :class:`~hitchhiker.environments.base.Environment`,
through :func:`get`; none imports an environment's modules, so a new environment is a
module whose ``ENVIRONMENT`` is an instance of a subclass (fetch, make_states, audit and score;
base.py has a default for the rest) and a line in ENVIRONMENTS, with no change to rollout,
score, training, evaluation or the Snakefile.

Only the configured environment is imported, and a rule's code inputs hold only its modules
(sources.files reads ENVIRONMENTS without importing it): editing the sequential environment
does not rerun a market run.
"""

from __future__ import annotations

import importlib

from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.base import Environment, check_scored

ENVIRONMENTS = {  # name: the module whose ENVIRONMENT it is
    "market": "hitchhiker.environments.market.environment",
    "synthetic": "hitchhiker.environments.market.synthetic",
    "sequential": "hitchhiker.environments.market.sequential",
    "weather": "hitchhiker.environments.weather",
    "openenv": "hitchhiker.environments.openenv",
}


def get(name: str) -> Environment:
    if name not in ENVIRONMENTS:
        raise HitchhikerError(f"config key environment = {name!r}: not one of {', '.join(ENVIRONMENTS)}")
    return importlib.import_module(ENVIRONMENTS[name]).ENVIRONMENT


__all__ = ["ENVIRONMENTS", "Environment", "check_scored", "get"]
