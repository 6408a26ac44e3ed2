"""train.objective: what grpo_train trains on the replayed rounds, one module each.

Every objective reads the same replayed buffer rows (rows.py builds what each trains on)
and declares, as module-level names:

- ``READS``: the train keys it reads that not every objective does (a key set away from its
  default under an objective that does not read it is an error, not ignored);
- ``PRICED``: whether it needs every action's reward (the environment's action_rewards);
- ``NOTHING``: why a round gives it nothing to train on, when it can (build returns None);
- ``build(cfg, samples, priced, model, tokenizer, peft_config, common)``: its trainer, with
  the TrainingArguments every objective shares (``common``), or None;
- optionally ``check(cfg, env)``: what it refuses, in one line (``env`` None where the
  stage validating the config reads no environment).

A new objective is a module here and a line in OBJECTIVES (and its name in the schema's enum).
Only the configured objective is imported, and grpo_train's code inputs hold only its module
(sources.files reads OBJECTIVES without importing it).
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType

from hitchhiker.cli import HitchhikerError

OBJECTIVES = {  # name: its module
    "grpo": "hitchhiker.training.objectives.grpo",
    "dpo": "hitchhiker.training.objectives.dpo",
    "best_answers": "hitchhiker.training.objectives.best_answers",
    "full_information": "hitchhiker.training.objectives.full_information",
}


def get(name: str) -> ModuleType:
    if name not in OBJECTIVES:
        raise HitchhikerError(f"config key train.objective = {name!r}: not one of {', '.join(OBJECTIVES)}")
    return importlib.import_module(OBJECTIVES[name])


def check(cfg: dict, train_schema: dict, env=None) -> None:
    """The configured objective's own refusals, and a key only other objectives read set
    away from its default (a setting the run would silently ignore)."""
    train = cfg["train"]
    chosen = get(train["objective"])
    reads = set(chosen.READS)
    readers: dict[tuple[str, ...], list[str]] = {}
    for name in OBJECTIVES:
        for path in get(name).READS:
            readers.setdefault(path, []).append(name)
    for path, names in readers.items():
        if path in reads:
            continue
        value, sub = train, train_schema
        for i, key in enumerate(path):
            value = value[key]
            sub = sub[key]["properties"] if i + 1 < len(path) else sub[key]
        if value != sub["default"]:
            raise HitchhikerError(
                f"config key train.{'.'.join(path)} = {json.dumps(value)} applies only to train.objective = "
                f"{' or '.join(sorted(names))}, not {train['objective']} (remove it or set it to "
                f"{json.dumps(sub['default'])})"
            )
    written = (cfg.get("rollout") or {}).get("each_answer")
    if written and not (hasattr(chosen, "reads_written_answers") and chosen.reads_written_answers(train)):
        raise HitchhikerError(
            "config key rollout.each_answer = true writes the answers for the policy: only train.objective "
            "full_information with train.full_information.rationale best_answers trains from such samples"
        )
    if hasattr(chosen, "check"):
        chosen.check(cfg, env)
