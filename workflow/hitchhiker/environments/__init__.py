"""Environments: what is domain-specific lives behind one protocol, chosen by the config key
``environment``. Stages call only the methods below, through :func:`get`; none imports an
environment's modules, so a new environment is a new entry in ENVIRONMENTS (and its own
config checks), with no change to rollout, score, training, evaluation or the Snakefile.

Frames are pandas; a state is one row of the states table (state_id, split, format, date,
horizon, tickers, prompt, plus what the environment adds), an outcome one row of the
outcomes table (state_id, split, format, outcome_date, tickers, forward_returns). Example::

    env = environments.get("market")
    states, outcomes = env.make_states(prices, cfg, fits)
    env.audit(prices, states, outcomes, cfg)                 # raises on leakage
    scored = env.score(samples, states, outcomes, cfg["reward"])
    table = env.baselines(states, outcomes, cfg["reward"])
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pandas as pd

from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.market import Market
from hitchhiker.environments.sequential import Sequential
from hitchhiker.environments.synthetic import simulated_closes


class Environment(Protocol):
    name: str

    def check_config(self, cfg: dict) -> None:
        """Raise HitchhikerError (one line naming the key) for a config this environment
        cannot run; ``cfg`` may hold only the sections a stage reads. Called by config.validate."""

    def check_data(self, prices: pd.DataFrame, cfg: dict) -> None:
        """Raise HitchhikerError (one line) if the cleaned price table cannot make the
        configured states, e.g. a split with no decision date; called before any job runs."""

    def make_states(
        self, prices: pd.DataFrame, cfg: dict, fits, news: pd.DataFrame | None = None
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(states, outcomes) for every configured split from the price table (date, ticker,
        close, ...). ``fits(texts, budget) -> bool array`` says whether each rendered user
        message, chat-templated, has at most ``budget`` tokens; ``news`` is the headline
        table (date, ticker, headline) or None. A prompt may show nothing dated after its
        state's date; the outcome is what follows it. Deterministic given cfg["seed"]."""

    def audit(
        self,
        prices: pd.DataFrame,
        states: pd.DataFrame,
        outcomes: pd.DataFrame,
        cfg: dict,
        news: pd.DataFrame | None = None,
    ) -> dict:
        """Re-derive every state and outcome from the data up to its date; raise
        HitchhikerError naming the first state that differs. Returns the report audit.json
        holds: at least states_checked and frequency."""

    def score(
        self, samples: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict
    ) -> pd.DataFrame:
        """Per sample row (state_id, completion, answers: the model's text per turn), indexed
        like ``samples``: valid, invalid_reason, reward (the environment's dollar reward,
        invalid answers at reward.invalid_penalty), unsupported_claims (the claims its text
        makes that the state does not support, what the grounding penalty charges),
        supported_claims (those it supports, what the supported-claim bonus pays), and the
        environment's own columns (the market's: action, weights, ranking, correct,
        preference, a count per kind of claim). ``correct`` (1, 0 or NaN), where given, is
        reported as accuracy. Never raises on a completion."""

    def action_rewards(self, outcomes: pd.DataFrame, reward_cfg: dict) -> pd.DataFrame:
        """Where the environment prices every action of a state (a market knows each ticker's
        forward return): one row per (state_id, action) with the action's answer text, its
        weights and the reward score would pay that answer. Single-turn environments only; a
        multi-turn one, whose later turns depend on earlier actions, has none."""

    def answer_metrics(self, scored: pd.DataFrame, block: int, seed: int) -> dict:
        """The environment's own metrics of one policy's scored answers in one decoding mode
        (with date, format, tickers and forward_returns joined), for metrics.json: each a
        mean with a block-bootstrap 95% interval over dates (blocks of ``block`` dates)."""

    def claim_rates(self, scored: pd.DataFrame) -> pd.DataFrame:
        """Per scored answer: any_rate and one 0/1 column per claim kind (1 where the answer
        has one), unsupported_per_answer, and any measure that tells a fall in them from writing
        less (the market's: stating_figures_rate, supported_per_answer, completion_chars);
        evaluate and summarize report their means."""

    def baselines(self, states: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict) -> pd.DataFrame:
        """Simple rules on the same states, rewarded as the policy: one row per (baseline,
        state) with baseline, state_id, date, reward."""

    def corpus(self, tickers: list[str], seed: int) -> list[str]:
        """Texts (prompts and answers) to train the tiny model's tokenizer on."""

    def practice_turn(self, tickers: list[str], rng: np.random.Generator, i: int) -> tuple[str, list[str]]:
        """The i-th practice prompt on random data, drawn from ``rng``, and every valid first
        word of an answer to it (the tiny model's format warm-up)."""


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
