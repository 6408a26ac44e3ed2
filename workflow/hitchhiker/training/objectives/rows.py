"""The rows each objective trains on, built from the same replayed buffer rows.

``samples`` is :func:`hitchhiker.buffer.replay`'s frame: one row per stored sample, a group
per (round, state) named "round/state_id", with its prompt and completion token ids (the
tokens the policy sampled, never decoded and tokenized again), model_mask and reward.
"""

from __future__ import annotations

import pandas as pd


def _first(samples: pd.DataFrame, best: bool) -> pd.DataFrame:
    """Each group's best (or worst) sample, indexed by group: the lowest sample index among equals."""
    order = samples.sort_values(["group", "reward", "sample_idx"], ascending=[True, not best, True])
    return order.groupby("group", sort=True).head(1).set_index("group")


def dpo_pairs(samples: pd.DataFrame, margin: float) -> pd.DataFrame:
    """One row per group whose best and worst sample differ by more than ``margin`` in
    reward: prompt_ids, chosen_ids (the best), rejected_ids (the worst), their sample indices
    and rewards."""
    best, worst = _first(samples, best=True), _first(samples, best=False)
    keep = best.index[(best["reward"] - worst.loc[best.index, "reward"]) > margin]
    b, w = best.loc[keep], worst.loc[keep]
    return pd.DataFrame(
        {
            "group": keep,
            "prompt_ids": [list(x) for x in b["prompt_ids"]],
            "chosen_ids": [list(x) for x in b["completion_ids"]],
            "rejected_ids": [list(x) for x in w["completion_ids"]],
            "chosen_idx": b["sample_idx"].to_numpy(),
            "rejected_idx": w["sample_idx"].to_numpy(),
            "chosen_reward": b["reward"].to_numpy(),
            "rejected_reward": w["reward"].to_numpy(),
        }
    )


def best_answers(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per group whose best sample beat the group's mean reward: input_ids (prompt
    then completion), completion_mask (1 on the model's own tokens), its sample index and
    reward."""
    mean = samples.groupby("group")["reward"].mean()
    best = _first(samples, best=True)
    best = best[best["reward"] > mean.loc[best.index]]
    return pd.DataFrame(
        {
            "group": best.index,
            "input_ids": [list(p) + list(c) for p, c in zip(best["prompt_ids"], best["completion_ids"], strict=True)],
            "completion_mask": [
                [0] * len(p) + list(m) for p, m in zip(best["prompt_ids"], best["model_mask"], strict=True)
            ],
            "sample_idx": best["sample_idx"].to_numpy(),
            "reward": best["reward"].to_numpy(),
        }
    )


def action_rows(samples: pd.DataFrame, priced: pd.DataFrame, tokenizer, paid_only: bool = False) -> pd.DataFrame:
    """One row per group: its prompt_ids, every priced action's answer text as token ids
    (action_ids, in the order of ``priced``), the actions' rewards, and the group's best
    sample above its mean as best_answers gives it (best_ids, best_mask; empty where none).
    ``priced`` is the environment's action_rewards of the groups' states. With
    ``paid_only`` (rollout.each_answer), only a best sample whose reason the grounding reward
    paid (reason_paid > 0) is kept: elsewhere the group has no best sample, and what follows
    its answer word is left untrained. Trained as the answer alone then the end of the turn
    (until 2026-12-03), the 81% of weather days without a paid reason taught the bare answer:
    greedy answers were bare on every seed and seed 1 gave a reason in 4.4% of its sampled
    answers; trained as their best unpaid sample, they taught the commonest unpaid reason
    ("yes because it will rain tomorrow", SmolLM2's first weather rollout)."""
    first = samples.sort_values(["group", "sample_idx"]).groupby("group", sort=True).head(1).set_index("group")
    best = best_answers(samples).set_index("group")
    if paid_only:
        paid = samples.set_index(["group", "sample_idx"])["reason_paid"].fillna(0.0)
        best = best[[paid[(g, i)] > 0 for g, i in zip(best.index, best["sample_idx"], strict=True)]]
    ids = {a: tokenizer(a, add_special_tokens=False)["input_ids"] for a in priced["action"].unique()}
    by_state = {
        sid: (list(rows["action"]), [float(r) for r in rows["reward"]]) for sid, rows in priced.groupby("state_id")
    }
    best_ids, best_mask = best["input_ids"].to_dict(), best["completion_mask"].to_dict()
    return pd.DataFrame(
        {
            "group": first.index,
            "prompt_ids": [list(p) for p in first["prompt_ids"]],
            "action_ids": [[ids[a] for a in by_state[sid][0]] for sid in first["state_id"]],
            "rewards": [by_state[sid][1] for sid in first["state_id"]],
            # the group's best sample above its mean (best_answers), empty where none
            "best_ids": [best_ids.get(g, []) for g in first.index],
            "best_mask": [best_mask.get(g, []) for g in first.index],
        }
    )
