"""The reward the objectives train on, from an environment's score of a batch of answers: one
code path for the score stage and for the TRL adapter (for_trl.py).

The environment's reward (``environment_reward``) less grounding.unsupported_claim_penalty
for each unsupported claim, plus grounding.reason_bonus where the reason argues for the answer
from what the prompt supports, scaled down by how many of the batch's answers give the same
reason, less the bonus where it argues for another answer (rationales.paid): a copied reason
earns nothing, one against its own answer costs what a reason for it earns.
"""

from __future__ import annotations

import pandas as pd

from hitchhiker import environments


def grounded(env, keys: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """``keys`` (state_id, sample_idx, completion, answers) scored by ``env``: its columns but
    completion and answers, the environment's columns, ``environment_reward`` and ``reward``
    (and, with grounding.reason_bonus, ``reason_paid``: rationales.paid's share of it)."""
    scored = environments.check_scored(env, env.score(keys, states, outcomes, cfg["reward"]), keys)
    scored = scored.rename(columns={"reward": "environment_reward"})
    scores = keys.drop(columns=["completion", "answers"]).join(scored)
    penalty, bonus = cfg["grounding"]["unsupported_claim_penalty"], cfg["grounding"]["reason_bonus"]
    scores["reward"] = scores["environment_reward"] - penalty * scores["unsupported_claims"]
    if bonus:  # config.validate: only for an environment that reads reasons
        from hitchhiker import rationales

        scores["reason_paid"] = rationales.paid(scored.assign(completion=keys["completion"]))
        scores["reward"] += bonus * scores["reason_paid"]
    return scores
