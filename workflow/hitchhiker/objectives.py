"""What each train.objective trains on, built from the same replayed buffer rows, and the
trainer that owns its loss.

``samples`` is :func:`hitchhiker.buffer.replay`'s frame: one row per stored sample, a group
per (round, state) named "round/state_id", with its prompt and completion token ids (the
tokens the policy sampled, never decoded and tokenized again), model_mask and reward.

- grpo: every sample, replayed through TRL's rollout_func into ReplayGRPOTrainer
  (hitchhiker.replay_trainer), its advantage its reward against its group's.
- dpo (:func:`dpo_pairs`): one pair per group, drawn once per epoch: the group's best sample
  chosen and its worst rejected (the first by sample index among equals), where their rewards
  differ by more than train.dpo.margin; a group whose samples all earned the same gives none.
  TRL's DPOTrainer (hitchhiker.dpo_trainer: each pair's prompt computed once, with
  train.share_prompt); its reference is the round's starting policy (with LoRA, the model with
  the adapter off), whose logprobs TRL computes once before training
  (precompute_ref_log_probs). Not the buffer's behaviour logprobs: those were taken at each
  state's sampling temperature (rollout.temperature_eps jitters it), and DPO's reference is
  the policy at temperature 1.
- best_answers (:func:`best_answers`): each group's best sample where its reward is above
  its group's mean (RAFT's reward-ranked fine-tuning: a group of equals teaches nothing),
  the loss on the model's own tokens only (model_mask: not the prompt, not an environment's
  turns). TRL's SFTTrainer.
- full_information (:func:`action_rows`): one row per (round, state) with every action the
  environment prices (its action_rewards) as token ids, trained by
  hitchhiker.full_information.
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


def action_rows(samples: pd.DataFrame, priced: pd.DataFrame, tokenizer) -> pd.DataFrame:
    """One row per group: its prompt_ids, every priced action's answer text as token ids
    (action_ids, in the order of ``priced``), the actions' rewards, and the group's best
    sample above its mean as best_answers gives it (best_ids, best_mask; empty where none).
    ``priced`` is the environment's action_rewards of the groups' states."""
    first = samples.sort_values(["group", "sample_idx"]).groupby("group", sort=True).head(1).set_index("group")
    best = best_answers(samples).set_index("group")
    ids = {a: tokenizer(a, add_special_tokens=False)["input_ids"] for a in priced["action"].unique()}
    by_state = {
        sid: (list(rows["action"]), [float(r) for r in rows["reward"]]) for sid, rows in priced.groupby("state_id")
    }
    return pd.DataFrame(
        {
            "group": first.index,
            "prompt_ids": [list(p) for p in first["prompt_ids"]],
            "action_ids": [[ids[a] for a in by_state[sid][0]] for sid in first["state_id"]],
            "rewards": [by_state[sid][1] for sid in first["state_id"]],
            # the group's best sample above its mean (best_answers), empty where none
            "best_ids": [best["input_ids"].get(g, []) for g in first.index],
            "best_mask": [best["completion_mask"].get(g, []) for g in first.index],
        }
    )


def trainer(cfg: dict, samples: pd.DataFrame, priced: pd.DataFrame | None, model, tokenizer, peft_config, common: dict):
    """The trainer of train.objective on ``samples``, with the TrainingArguments every
    objective shares (``common``: output directory, batch, schedule, seeds, precision,
    logging, checkpoints). ``priced``: the environment's action_rewards of the samples'
    states (full_information only). None when the objective finds nothing to train on (dpo:
    no group with a pair; best_answers: no group whose best beat its mean)."""
    from datasets import Dataset

    tr, group = cfg["train"], cfg["rollout"]["samples_per_state"]
    objective = tr["objective"]
    share = tr["share_prompt"] is not False  # null: on for each objective that reads it
    if objective == "grpo":
        import torch
        from trl import GRPOConfig

        from hitchhiker import grpo_train, shared_prompt
        from hitchhiker.replay_trainer import ReplayGRPOTrainer

        sampling = tr["importance_sampling"]
        args = GRPOConfig(
            **common,
            num_generations=group,
            beta=tr["beta"],
            loss_type=tr["loss_type"],
            scale_rewards=tr["scale_rewards"],
            temperature=cfg["rollout"]["temperature"],
            max_completion_length=cfg["rollout"]["max_new_tokens"],
            vllm_importance_sampling_correction=sampling["enabled"] is not False,
            vllm_importance_sampling_mode=sampling["mode"],
            vllm_importance_sampling_clip_max=sampling["cap"],
            # TRL's own step on CUDA pads its batch as the shared step pads its packed rows
            # (shared_prompt.PAD_TO): few widths, so few cuDNN builds. Not the shared step's batch:
            # it packs its rows itself, and padded completions would widen every packed row.
            pad_to_multiple_of=shared_prompt.PAD_TO["cuda"] if torch.cuda.is_available() and not share else None,
        )
        return ReplayGRPOTrainer(
            model=model,
            reward_funcs=grpo_train.environment_reward,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": sorted(samples["group"].unique())}),
            processing_class=tokenizer,
            peft_config=peft_config,
            rollout_func=grpo_train.replay_rollout_func(samples, group),
            importance_sampling=sampling["enabled"] is not False,
            share_prompt=share,
        )
    if objective == "dpo":
        from trl import DPOConfig

        from hitchhiker.dpo_trainer import TokenizedDPOTrainer

        pairs = dpo_pairs(samples, tr["dpo"]["margin"])
        if pairs.empty:
            return None
        args = DPOConfig(**common, beta=tr["dpo"]["beta"], precompute_ref_log_probs=True, max_length=None)
        data = Dataset.from_pandas(pairs[["prompt_ids", "chosen_ids", "rejected_ids"]], preserve_index=False)
        return TokenizedDPOTrainer(
            model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft_config,
            share_prompt=share,
        )  # fmt: skip
    if objective == "best_answers":
        from trl import SFTConfig, SFTTrainer

        rows = best_answers(samples)
        if rows.empty:
            return None
        args = SFTConfig(**common, completion_only_loss=True, max_length=None)
        data = Dataset.from_pandas(rows[["input_ids", "completion_mask"]], preserve_index=False)
        return SFTTrainer(
            model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft_config
        )
    from peft import get_peft_model
    from transformers import TrainingArguments

    from hitchhiker.full_information import FullInformationTrainer

    rows = action_rows(samples, priced, tokenizer)
    return FullInformationTrainer(
        model=get_peft_model(model, peft_config) if peft_config is not None else model,
        args=TrainingArguments(**common, remove_unused_columns=False),
        train_dataset=Dataset.from_pandas(rows.drop(columns="group"), preserve_index=False),
        processing_class=tokenizer,
        share_prompt=share,
        rationale=tr["full_information"]["rationale"],
    )
