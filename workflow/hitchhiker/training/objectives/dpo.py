"""dpo: one pair per group (rows.dpo_pairs), drawn once per epoch: the group's best sample
chosen and its worst rejected, where their rewards differ by more than train.dpo.margin.
TRL's DPOTrainer (hitchhiker.training.dpo_trainer: each pair's prompt computed once, with
train.share_prompt); its reference is the round's starting policy (with LoRA, the model with
the adapter off), whose logprobs TRL computes once before training
(precompute_ref_log_probs). Not the buffer's behaviour logprobs: those were taken at each
state's sampling temperature (rollout.temperature_eps jitters it), and DPO's reference is the
policy at temperature 1."""

from __future__ import annotations

import pandas as pd

from hitchhiker.cli import HitchhikerError
from hitchhiker.training.objectives import rows

READS = [("share_prompt",), ("dpo", "beta"), ("dpo", "margin")]
PRICED = False
NOTHING = "no group's best and worst samples differ by more than train.dpo.margin = {train[dpo][margin]}"


def check(cfg: dict, env) -> None:
    if env is not None and env.has_turns(cfg):
        raise HitchhikerError(
            f"config key train.objective = dpo: the {cfg['environment']} environment's completions hold the "
            "environment's turns, which DPOTrainer would train as the model's own tokens (grpo and best_answers "
            "mask them)"
        )


def build(cfg: dict, samples: pd.DataFrame, priced, model, tokenizer, peft_config, common: dict):
    from datasets import Dataset
    from trl import DPOConfig

    from hitchhiker.training.dpo_trainer import TokenizedDPOTrainer

    tr = cfg["train"]
    pairs = rows.dpo_pairs(samples, tr["dpo"]["margin"])
    if pairs.empty:
        return None
    args = DPOConfig(**common, beta=tr["dpo"]["beta"], precompute_ref_log_probs=True, max_length=None)
    data = Dataset.from_pandas(pairs[["prompt_ids", "chosen_ids", "rejected_ids"]], preserve_index=False)
    return TokenizedDPOTrainer(
        model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft_config,
        share_prompt=tr["share_prompt"] is not False,
    )  # fmt: skip
