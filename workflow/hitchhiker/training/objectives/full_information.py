"""full_information: one row per (round, state) with every action the environment prices
(its action_rewards) as token ids (rows.action_rows), trained by
hitchhiker.training.full_information: where TRL has no objective that reads the reward of
every action, the smallest trainer that does."""

from __future__ import annotations

import os

import pandas as pd

from hitchhiker.cli import HitchhikerError
from hitchhiker.training.objectives import rows

READS = [
    ("share_prompt",),
    ("full_information", "rationale"),
    ("full_information", "decision_anchor"),
    ("full_information", "decision_epochs"),
    ("full_information", "decision_rounds"),
    ("full_information", "push_budget"),
]
PRICED = True


def reads_written_answers(train: dict) -> bool:
    """Whether samples of rollout.each_answer (the answers written, only the reasons sampled)
    train this objective: the answer is trained on every action's price, never on a sampled
    one, and the reason by best_answers where it is on."""
    return train["full_information"]["rationale"] == "best_answers"


NOTHING = None


def check(cfg: dict, env) -> None:
    if (cfg.get("rollout") or {}).get("dynamic_sampling"):
        raise HitchhikerError(
            f"config key rollout.dynamic_sampling = {cfg['rollout']['dynamic_sampling']}: train.objective "
            "full_information trains every action's reward, whatever the samples' spread; leave it null"
        )
    if env is not None and not env.prices_actions():
        raise HitchhikerError(
            f"config key train.objective = full_information: the {cfg['environment']} environment does not price "
            "every action of a state (no action_rewards: its later turns depend on earlier actions)"
        )
    fi = cfg["train"]["full_information"]
    if fi["decision_rounds"] is not None and fi["rationale"] != "best_answers":
        raise HitchhikerError(
            f"config key train.full_information.decision_rounds = {fi['decision_rounds']}: the rounds after it "
            "train the reasons alone, and rationale is untrained (they would train nothing); set rationale: "
            "best_answers or decision_rounds: null"
        )
    rollout = cfg.get("rollout") or {}
    if fi["push_budget"] is not None and (fi["rationale"] != "best_answers" or not rollout.get("each_answer", True)):
        raise HitchhikerError(
            f"config key train.full_information.push_budget = {fi['push_budget']}: it scales the reasons pushed "
            "down, which only rationale: best_answers with rollout.each_answer trains; leave it null"
        )


def build(cfg: dict, samples: pd.DataFrame, priced, model, tokenizer, peft_config, common: dict):
    from datasets import Dataset
    from peft import get_peft_model
    from transformers import TrainingArguments

    from hitchhiker.training import shared_prompt
    from hitchhiker.training.full_information import FullInformationTrainer, action_reference, reference_logps

    tr = cfg["train"]
    fi = tr["full_information"]
    if fi["decision_epochs"] and os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true":  # set by accelerate launch
        raise HitchhikerError(
            f"config key train.full_information.decision_epochs = {fi['decision_epochs']}: not under DeepSpeed (the "
            "answer word's passes and the reason's would be two engines in one process); set it to 0"
        )
    r = int(samples["round"].max())
    # past decision_rounds the answer word is not trained (its term and its own passes off):
    # only the reasons are, and decision_anchor holds the answer word where those rounds left it
    decides = fi["decision_rounds"] is None or r <= fi["decision_rounds"]
    first = fi["decision_epochs"] if decides else 0
    bonus = cfg["grounding"]["reason_bonus"] if cfg["rollout"]["each_answer"] else None  # > 0: config.validate
    table = rows.action_rows(samples, priced, tokenizer, reason_bonus=bonus, push_budget=fi["push_budget"])
    if reads_written_answers(tr):
        print(f"full_information: the rationale trains {_trained_text(table, tokenizer)}", flush=True)
    model = get_peft_model(model, peft_config) if peft_config is not None else model
    attn = shared_prompt.packed_attention(model)
    share = tr["share_prompt"] is not False and attn is not None
    decision_log = []
    if first:
        # the answer word alone first: a Trainer of its own, so that the passes with the reasons
        # keep their own schedule and start, as any round does, from the policy they hold to.
        # No checkpoints: a resumed round runs these passes again (the same on a CPU) before
        # resuming the others from theirs
        alone = FullInformationTrainer(
            model=model,
            args=TrainingArguments(
                **{**common, "num_train_epochs": first, "save_strategy": "no", "report_to": []},
                remove_unused_columns=False,
            ),
            train_dataset=Dataset.from_pandas(table.drop(columns="group"), preserve_index=False),
            processing_class=tokenizer,
            share_prompt=tr["share_prompt"] is not False,
        )
        alone.train()
        decision_log = [{**row, "phase": "decision"} for row in alone.state.log_history]
        p_best = [row["full_information/p_best"] for row in decision_log if "full_information/p_best" in row]
        print(
            f"full_information: the answer word alone, {first} epoch(s), {alone.state.global_step} step(s): "
            f"p_best {p_best[0]:.3f} in the first, {p_best[-1]:.3f} in the last",
            flush=True,
        )
    # the round's starting policy, for the reasons, is the model now (a fresh adapter adds
    # nothing; after the answer word's passes, their policy): what the trainer holds to is
    # read in one pass without gradients before training
    if reads_written_answers(tr) and any(w < 0 for ws in table["best_weight"] for w in ws):
        # the reasons pushed down stop at a floor under it
        table["best_ref"] = reference_logps(
            model,
            table.to_dict("records"),
            share,
            attn == "eager",
            tr["per_device_batch_size"],
            common.get("bf16", False),
        )
    anchor = fi["decision_anchor"] if r > 1 or first else 0.0
    if anchor:
        table["action_ref"] = action_reference(
            model,
            table.to_dict("records"),
            share,
            attn == "eager",
            tr["per_device_batch_size"],
            common.get("bf16", False),
        )
    trainer = FullInformationTrainer(
        model=model,
        args=TrainingArguments(**common, remove_unused_columns=False),
        train_dataset=Dataset.from_pandas(table.drop(columns="group"), preserve_index=False),
        processing_class=tokenizer,
        share_prompt=tr["share_prompt"] is not False,
        rationale=fi["rationale"],
        decision_anchor=anchor,
        decision=decides,
    )
    if not decides:
        print(f"full_information: round {r} trains the reasons alone (past decision_rounds)", flush=True)
    trainer.earlier_log = decision_log  # train_log.csv's first rows
    return trainer


def _trained_text(table: pd.DataFrame, tokenizer) -> str:
    """How many samples the rationale trains, after which answer word, and how many of them
    it pushes down ("132 samples of 768 groups: after 'no' 18, after 'yes' 114; 40 weighed
    below zero")."""
    after: dict[str, int] = {}
    below = 0
    for prompt, best, weights, actions in zip(
        table["prompt_ids"], table["best_ids"], table["best_weight"], table["action_ids"], strict=True
    ):
        for ids in best:
            c = list(ids[len(prompt) :])
            word = next((tokenizer.decode(a) for a in actions if c[: len(a)] == list(a)), "another word")
            after[word] = after.get(word, 0) + 1
        below += sum(w < 0 for w in weights)
    counts = ", ".join(f"after {w!r} {n}" for w, n in sorted(after.items()))
    n = sum(after.values())
    return (
        f"{n} sample{'s' * (n != 1)} of {len(table)} groups"
        + (f": {counts}" if counts else "")
        + (f"; {below} weighed below zero" if below else "")
    )
