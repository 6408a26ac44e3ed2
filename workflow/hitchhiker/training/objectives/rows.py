"""The rows each objective trains on, built from the same replayed buffer rows.

``samples`` is :func:`hitchhiker.buffer.replay`'s frame: one row per stored sample, a group
per (round, state) named "round/state_id", with its prompt and completion token ids (the
tokens the policy sampled, never decoded and tokenized again), model_mask and reward.
"""

from __future__ import annotations

import numpy as np
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


def answer_reasons(
    samples: pd.DataFrame,
    answer_ids: list[list[int]],
    reason_bonus: float,
    eos: int | None = None,
    push_budget: float | None = None,
) -> pd.DataFrame:
    """rollout.each_answer's reason targets, trained after the answer word only (the answer is
    full_information's action term's alone), each sample weighed by what the grounding terms
    paid or charged its reason (``grounding``: the reason bonus less the claims' penalty), in
    units of grounding.reason_bonus: a reason that argues for its answer from what holds is
    imitated (up to 1, less where the round's other answers give it too), one that claims
    what its prompt does not show is pushed down (-penalty / bonus a claim), and one that
    argues nothing and claims nothing (a restated forecast, a recital) weighs nothing and is
    left out; whatever the answer, and whether or not the record paid it. Before: the best
    paid reason imitated alone (8a35375) taught a reason for whatever the answer was, false or
    not (21-32% of answers stated rain that did not fall); each reason by its advantage among
    its answer's samples (9a109e1) made a restated forecast, never false, the winner wherever
    another sample stated something false (94% of round 1's answers argued nothing). With
    nothing anchoring the reasons pushed down (be077b6, weather_claims seed 0, round 1), half
    the sampled answers became "because because ..." (docs/evidence.md): the trainer now stops
    pushing each token at a floor under the round's starting policy
    (hitchhiker.training.full_information.PUSHED_DOWN_CLIP). With ``push_budget``
    (train.full_information.push_budget) the reasons pushed down weigh at most that many times
    those imitated, in all: their weights scaled down to it, none pushed where none is imitated.
    Columns as best_answers', and weight."""
    weight = samples["grounding"].fillna(0.0) / reason_bonus
    if push_budget is not None:
        up, down = weight.clip(lower=0).sum(), -weight.clip(upper=0).sum()
        weight = weight.where(weight >= 0, weight * min(1.0, push_budget * up / down) if down else 0.0)
    # the reasons pushed down weigh what their claims cost, unscaled: the floor
    # (full_information.PUSHED_DOWN_CLIP) bounds each pushed token, which an earlier budget
    # (pushed-down mass <= imitated mass) stood in for; with the template cap (rationales.paid)
    # that budget scaled round 2's pushes to 0.37 and false rain rose (weather_claims seed 0)
    # left untrained: the answer word's tokens (0 where none leads), and in a reason pushed
    # down, what every reason shares: the words rollout wrote after the answer ("because": a
    # behaviour logprob of 0) and the end of the turn (``eos``). Pushed down by the false
    # reasons (260 of 353 trained in round 1 of weather_claims seed 0), "because" taught
    # SmolLM2 to stop after the answer word (800 of 800 sampled answers bare), and with
    # "because" kept, the end of the turn taught it not to stop ("because of rain because of
    # the wind because of rain", b8030b7)
    lead = [next((len(a) for a in answer_ids if list(c[: len(a)]) == a), 0) for c in samples["completion_ids"]]
    written = [next((i for i, x in enumerate(lp) if x != 0.0), len(lp)) for lp in samples["logprobs"]]
    led = samples.assign(lead=np.where(weight < 0, np.maximum(lead, written), lead), weight=weight)
    led = led[led["weight"].abs() > 1e-9].sort_values(["group", "sample_idx"])
    mask = [
        [*m[:-1], 0] if w < 0 and len(c) and c[-1] == eos else list(m)
        for c, m, w in zip(led["completion_ids"], led["model_mask"], led["weight"], strict=True)
    ]
    return pd.DataFrame(
        {
            "group": led["group"].to_numpy(),
            "input_ids": [list(p) + list(c) for p, c in zip(led["prompt_ids"], led["completion_ids"], strict=True)],
            "completion_mask": [
                [0] * (len(p) + n) + m[n:] for p, m, n in zip(led["prompt_ids"], mask, led["lead"], strict=True)
            ],
            "sample_idx": led["sample_idx"].to_numpy(),
            "reward": led["reward"].to_numpy(),
            "weight": led["weight"].to_numpy(),
        }
    )


def action_rows(
    samples: pd.DataFrame,
    priced: pd.DataFrame,
    tokenizer,
    reason_bonus: float | None = None,
    push_budget: float | None = None,
) -> pd.DataFrame:
    """One row per group: its prompt_ids, every priced action's answer text as token ids
    (action_ids, in the order of ``priced``), the actions' rewards, and the group's samples
    the rationale trains (best_ids, best_mask, best_weight: a list of each, empty where none):
    its best sample above its mean as best_answers gives it (weight 1), or with ``reason_bonus``
    (rollout.each_answer's grounding.reason_bonus) each reason by what the grounding terms paid
    or charged it (answer_reasons, under ``push_budget``). Elsewhere what follows the answer word is left untrained:
    trained as the answer alone then the end of the turn (until 2026-12-03), the 81% of
    weather days without a paid reason taught the bare answer (greedy answers bare on every
    seed); trained as their best unpaid sample, they taught the commonest unpaid reason ("yes
    because it will rain tomorrow").
    ``priced`` is the environment's action_rewards of the groups' states."""
    first = samples.sort_values(["group", "sample_idx"]).groupby("group", sort=True).head(1).set_index("group")
    ids = {a: tokenizer(a, add_special_tokens=False)["input_ids"] for a in priced["action"].unique()}
    if reason_bonus is None:
        best = best_answers(samples).assign(weight=1.0)
    else:
        best = answer_reasons(samples, list(ids.values()), reason_bonus, tokenizer.eos_token_id, push_budget)
    best_ids = best.groupby("group")["input_ids"].agg(list).to_dict()
    best_mask = best.groupby("group")["completion_mask"].agg(list).to_dict()
    best_weight = best.groupby("group")["weight"].agg(list).to_dict()
    by_state = {
        sid: (list(rows["action"]), [float(r) for r in rows["reward"]]) for sid, rows in priced.groupby("state_id")
    }
    return pd.DataFrame(
        {
            "group": first.index,
            "prompt_ids": [list(p) for p in first["prompt_ids"]],
            "action_ids": [[ids[a] for a in by_state[sid][0]] for sid in first["state_id"]],
            "rewards": [by_state[sid][1] for sid in first["state_id"]],
            "best_ids": [best_ids.get(g, []) for g in first.index],
            "best_mask": [best_mask.get(g, []) for g in first.index],
            "best_weight": [[float(w) for w in best_weight.get(g, [])] for g in first.index],
        }
    )
