"""grpo: every sample, replayed through TRL's rollout_func into ReplayGRPOTrainer
(hitchhiker.training.replay_trainer), its advantage its reward against its group's. TRL owns
the objective (loss variants, KL, clipping, logging, PEFT, DeepSpeed); we replay the stored
completions and their behaviour logprobs instead of generating."""

from __future__ import annotations

import pandas as pd

from hitchhiker.cli import HitchhikerError

READS = [
    ("beta",),
    ("loss_type",),
    ("scale_rewards",),
    ("importance_sampling", "enabled"),
    ("importance_sampling", "mode"),
    ("importance_sampling", "cap"),
    ("share_prompt",),
]
PRICED = False
NOTHING = (  # only under rollout.dynamic_sampling, which drops the groups without reward spread
    "fewer groups whose rewards differ than one optimizer step takes (train.per_device_batch_size x "
    "gradient_accumulation_steps x num_processes / rollout.samples_per_state)"
)


def check(cfg: dict, env) -> None:
    train, rollout = cfg["train"], cfg.get("rollout")
    if not rollout:
        return
    batch = train["per_device_batch_size"] * train["gradient_accumulation_steps"]
    if (batch * train["num_processes"]) % rollout["samples_per_state"]:
        raise HitchhikerError(
            f"config key train.per_device_batch_size = {train['per_device_batch_size']}: "
            f"per_device_batch_size x gradient_accumulation_steps x num_processes must be a "
            f"multiple of rollout.samples_per_state = {rollout['samples_per_state']} "
            "(whole GRPO groups per step)"
        )


def replay_rollout_func(samples: pd.DataFrame, group_size: int):
    """TRL rollout_func returning stored samples instead of generating.

    TRL passes this process's slice of the generation batch: each state_id repeated
    ``group_size`` times in a row, groups aligned to the start of the global batch, and the
    slices of the processes laid end to end. The position in the global batch therefore
    gives the sample index within the group.
    """
    table = {
        (g, int(k)): row
        for g, k, row in zip(samples.group, samples.sample_idx, samples.itertuples(index=False), strict=True)
    }

    def rollout_func(prompts: list[str], trainer) -> dict:
        offset = trainer.accelerator.process_index * len(prompts)
        rows = []
        for i, sid in enumerate(prompts):
            pos = offset + i
            first = i - pos % group_size  # where this group starts in the slice
            if first >= 0 and prompts[first] != sid:
                raise RuntimeError(f"GRPO group misaligned at position {pos}: {prompts[first]} vs {sid}")
            rows.append(table[(sid, pos % group_size)])
        return {
            "prompt_ids": [list(r.prompt_ids) for r in rows],
            "completion_ids": [list(r.completion_ids) for r in rows],
            "logprobs": [list(r.logprobs) for r in rows],
            # TRL's name for it: 1 on the model's tokens, 0 on the environment's turns, which
            # neither the loss nor the importance-sampling correction counts
            "env_mask": [list(r.model_mask) for r in rows],
            "env_reward": [float(r.reward) for r in rows],
        }

    return rollout_func


def environment_reward(prompts, completions, env_reward, **kwargs) -> list[float]:
    """The reward the environment paid for each stored completion (computed by score)."""
    return list(env_reward)


def build(cfg: dict, samples: pd.DataFrame, priced, model, tokenizer, peft_config, common: dict):
    import torch
    from datasets import Dataset
    from trl import GRPOConfig

    from hitchhiker.training import shared_prompt
    from hitchhiker.training.replay_trainer import ReplayGRPOTrainer

    tr, group = cfg["train"], cfg["rollout"]["samples_per_state"]
    step = tr["per_device_batch_size"] * tr["gradient_accumulation_steps"] * tr["num_processes"]
    if samples["group"].nunique() * group < step:  # TRL's sampler would make no whole batch: no step
        return None
    share = tr["share_prompt"] is not False  # null: on
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
        reward_funcs=environment_reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": sorted(samples["group"].unique())}),
        processing_class=tokenizer,
        peft_config=peft_config,
        rollout_func=replay_rollout_func(samples, group),
        importance_sampling=sampling["enabled"] is not False,
        share_prompt=share,
    )
