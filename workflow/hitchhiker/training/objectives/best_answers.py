"""best_answers: each group's best sample where its reward is above its group's mean
(rows.best_answers; RAFT's reward-ranked fine-tuning: a group of equals teaches nothing), the
loss on the model's own tokens only (model_mask: not the prompt, not an environment's turns).
TRL's SFTTrainer."""

from __future__ import annotations

import pandas as pd

from hitchhiker.training.objectives import rows

READS: list[tuple[str, ...]] = []
PRICED = False
NOTHING = "no group's best sample beat its group's mean reward"


def build(cfg: dict, samples: pd.DataFrame, priced, model, tokenizer, peft_config, common: dict):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    best = rows.best_answers(samples)
    if best.empty:
        return None
    args = SFTConfig(**common, completion_only_loss=True, max_length=None)
    data = Dataset.from_pandas(best[["input_ids", "completion_mask"]], preserve_index=False)
    return SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, peft_config=peft_config)
