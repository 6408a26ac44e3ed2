"""grpo_train: train policy r on round r's replayed rollouts, by train.objective.

The objective (hitchhiker.training.objectives, one module each: grpo, the default, through
TRL's GRPOTrainer replaying the stored completions; dpo; best_answers; full_information)
builds the trainer from the round's replayed buffer rows (train.replay_rounds rounds back);
everything else here (checkpoints, resumption, the policy directory written) is the same for
all of them.

With train.save_steps, a checkpoint is written every that many optimizer steps next to the
output (.<out>-trainer/); a grpo_train killed part-way and started again on the same inputs
(config, buffer contents, starting policy) resumes from the last one and ends with the same
weights as an uninterrupted run. Other inputs discard the old checkpoints.

Writes, in the policy directory: model/ (HF format, the LoRA merged in), adapter/ (the LoRA
adapter, when train.lora is on; policy.json's "base" names the policy it applies to),
train_log.csv (TRL's metrics per step, and on every row what the round's groups held to
learn from: buffer.group_stats' figures as rollout/*, and rollout/trained_groups, the groups
trained on: under rollout.dynamic_sampling only those whose rewards differ) and
tensorboard/ (the same, as TensorBoard events).

Usage (Snakemake runs it through hitchhiker.launch, which picks accelerate or torchrun):
  python -m hitchhiker.stages.grpo_train --config config.yaml --round 1 \\
      --buffer results/default/buffer/round_1.duckdb --policy results/default/policy/round_0 \\
      --out results/default/policy/round_1
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import torch
from transformers import TrainerCallback

from hitchhiker import atomic, buffer, cli, config, environments, policy
from hitchhiker.training import lm_head, objectives

SECTIONS = ["run", "seed", "environment", "model", "rollout", "reward", "grounding", "train"]


def last_complete_checkpoint(work: Path) -> str | None:
    """The newest checkpoint that was written to the end, or None.

    transformers writes a checkpoint in place and its trainer_state.json last, so a run
    killed while saving leaves a newer directory without a readable one; its own
    get_last_checkpoint would pick that directory and fail to resume.
    """

    def complete(d: Path) -> bool:
        try:
            json.loads((d / "trainer_state.json").read_text())
        except (OSError, ValueError):
            return False
        return True

    done = [d for d in work.glob("checkpoint-*") if d.name.split("-")[-1].isdigit() and complete(d)]
    return str(max(done, key=lambda d: int(d.name.split("-")[-1]))) if done else None


def merge_adapter(base_policy: str, adapter: Path, model_cfg: dict):
    """The starting policy's weights with the trained LoRA adapter merged in."""
    from peft import PeftModel

    return PeftModel.from_pretrained(policy.load_model(base_policy, model_cfg), str(adapter)).merge_and_unload()


def round_figures(buffer_path: str, run: str, round_: int, trained_groups: int) -> dict:
    """What round ``round_``'s groups held to learn from (buffer.group_stats), as train_log columns."""
    stats = buffer.group_stats(buffer_path, run).set_index("round").loc[round_]
    return {f"rollout/{k}": v for k, v in stats.items()} | {"rollout/trained_groups": trained_groups}


def figures_text(figures: dict) -> str:
    text = f"{figures['rollout/zero_spread']:.0%} of the round's groups without reward spread"
    if pd.notna(figures["rollout/top_action"]):
        text += (
            f", first word {figures['rollout/action_entropy']:.2f} bits, "
            f"{figures['rollout/top_action']!r} in {figures['rollout/top_action_share']:.0%}"
        )
    return text


def _skip_trl_vllm_import() -> None:
    """grpo_train never generates (it replays the buffer), yet where vLLM is installed
    ``from trl import GRPOTrainer`` imports it through TRL's vLLM generation module: 13 s
    instead of 7 on 2 cores, in every round's process. TRL asks import_utils.is_vllm_available
    when that module is first imported, so answer no before then. The importance-sampling
    correction only reads the trainer's use_vllm flag (replay_trainer) and still runs."""
    import trl.import_utils as trl_imports  # the submodule itself: trl's lazy top level has no such attribute

    trl_imports.is_vllm_available = lambda *args, **kwargs: False


class _Halfway(TrainerCallback):
    """The console's line halfway through training (cli.Progress)."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.progress = cli.Progress(state.max_steps, "steps")

    def on_step_end(self, args, state, control, **kwargs):
        self.progress.update(state.global_step)


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--buffer", required=True, help="replay buffer (DuckDB) holding round r")
    p.add_argument("--policy", required=True, help="policy directory of round r-1 (the starting point)")
    p.add_argument("--out", required=True, help="policy directory of round r to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    policy.require_round(args.policy, args.round - 1, f"--round {args.round} trains from")
    _skip_trl_vllm_import()
    if not torch.cuda.is_available():
        lm_head.use_on_cpu()
    tr, ro = cfg["train"], cfg["rollout"]
    group = ro["samples_per_state"]
    samples = buffer.replay(args.buffer, cfg["run"], args.round, min(tr["replay_rounds"], args.round))
    if samples.empty:
        raise cli.HitchhikerError(f"buffer {args.buffer} holds no scored samples of round {args.round}")
    sizes = samples.groupby("group").size()
    if (sizes != group).any():
        raise cli.HitchhikerError(
            f"buffer {args.buffer}: group {sizes[sizes != group].index[0]} (round/state) has "
            f"{sizes[sizes != group].iloc[0]} samples, rollout.samples_per_state is {group}"
        )
    if ro["dynamic_sampling"]:  # full_information refuses it (its check): it prices every action
        reward = samples.groupby("group")["reward"]
        spread = reward.max() - reward.min()
        samples = samples[samples["group"].isin(spread.index[spread > 0])]
        sizes = sizes[sizes.index.isin(spread.index[spread > 0])]
    figures = round_figures(args.buffer, cfg["run"], args.round, len(sizes))

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from peft import LoraConfig

    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true"  # set by accelerate launch
    # DeepSpeed on a CPU trains in float32: transformers allows bf16 on a CPU only under its
    # use_cpu, which accelerate's DeepSpeed path cannot take (hitchhiker/launch.py); rollout
    # and evaluate keep model.dtype
    cpu_deepspeed = deepspeed and not torch.cuda.is_available()
    train_dtype = "float32" if cpu_deepspeed else policy.dtype(cfg["model"])
    if cpu_deepspeed and cfg["model"]["dtype"] != "float32" and int(os.environ.get("RANK", "0")) == 0:
        print(f"grpo_train: DeepSpeed on the CPU trains in float32 (model.dtype {cfg['model']['dtype']})", flush=True)
    tok = policy.load_tokenizer(args.policy, cfg["model"])
    model = policy.load_model(args.policy, {**cfg["model"], "dtype": train_dtype})
    lora = tr["lora"]
    peft_config = (
        LoraConfig(
            r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            target_modules=lora["target_modules"],
            task_type="CAUSAL_LM",
        )
        if lora["enabled"]
        else None
    )
    out = Path(args.out)
    work = out.parent / f".{out.name}-trainer"  # TRL's output_dir, holding the checkpoints
    inputs = json.dumps(
        {
            "config": cfg,
            "round": args.round,
            "buffer": hashlib.sha256(Path(args.buffer).read_bytes()).hexdigest(),
            "policy": str(Path(args.policy).resolve()),
            "dtype": train_dtype,  # model.dtype fast resolves per machine
        },
        sort_keys=True,
    )
    if int(os.environ.get("RANK", "0")) == 0:  # launched ranks share it: only the first prepares it
        stamp = work / "inputs.json"
        if not stamp.is_file() or stamp.read_text() != inputs:  # another run's checkpoints: discard
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            stamp.write_text(inputs)
    # transformers' TensorBoard callback reads its directory from this variable only; inside
    # the trainer's directory, a resumed run appends to the same logs.
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(work / "tensorboard")
    common = dict(  # the TrainingArguments every objective shares
        output_dir=str(work),
        per_device_train_batch_size=tr["per_device_batch_size"],
        gradient_accumulation_steps=tr["gradient_accumulation_steps"],
        num_train_epochs=tr["epochs"],
        learning_rate=tr["learning_rate"],
        lr_scheduler_type=tr["lr_scheduler"],
        gradient_checkpointing=tr["gradient_checkpointing"],  # TRL's configs default to True
        logging_steps=1,
        save_strategy="steps" if tr["save_steps"] else "no",
        save_steps=tr["save_steps"] or 500,
        report_to=["tensorboard"],
        seed=cfg["seed"] + args.round,
        data_seed=cfg["seed"] + args.round,
        # accelerate ignores DeepSpeed under use_cpu: on a CPU, DeepSpeed runs on its own CPU
        # accelerator (DS_ACCELERATOR=cpu), and accelerate needs the gloo backend named, or it
        # takes the job for a single process
        use_cpu=not torch.cuda.is_available() and not deepspeed,
        ddp_backend="gloo" if cpu_deepspeed else None,
        bf16=train_dtype == "bfloat16",
        disable_tqdm=False,
    )
    objective = objectives.get(tr["objective"])
    priced = None
    if objective.PRICED:
        env = environments.get(cfg["environment"])
        priced = env.action_rewards(
            buffer.outcomes(args.buffer, cfg["run"], samples["state_id"].unique()), cfg["reward"]
        )
    trainer = objective.build(cfg, samples, priced, model, tok, peft_config, common) if len(sizes) else None
    if trainer is None:  # nothing to learn from this round: the starting policy goes on unchanged
        if int(os.environ.get("RANK", "0")) != 0:  # launched ranks: the first writes it
            return
        with atomic.path(out, is_dir=True) as tmp:
            model.save_pretrained(tmp / "model")
            tok.save_pretrained(tmp / "model")
            if peft_config is not None:
                from peft import get_peft_model

                get_peft_model(model, peft_config).save_pretrained(tmp / "adapter")  # LoRA B = 0: the identity
            policy.write_spec(tmp, "model", args.round, adapter_of=args.policy if peft_config is not None else None)
            pd.DataFrame([figures]).to_csv(tmp / "train_log.csv", index=False)
            (tmp / "tensorboard").mkdir()
        shutil.rmtree(work, ignore_errors=True)
        why = (
            objective.NOTHING.format(train=tr) if len(sizes) else "no group's rewards differ (rollout.dynamic_sampling)"
        )
        print(
            f"grpo_train: round {args.round}, {tr['objective']}: {why} ({len(sizes)} groups; {figures_text(figures)}); "
            f"the policy goes on unchanged -> {args.out}"
        )
        return
    last = last_complete_checkpoint(work)
    if last and trainer.accelerator.is_main_process:
        print(f"grpo_train: resuming from {Path(last).name}", flush=True)
    trainer.add_callback(_Halfway())
    trainer.train(resume_from_checkpoint=last)
    # Every rank calls save_model: under DeepSpeed ZeRO-3 it gathers the sharded weights;
    # with LoRA it writes the adapter only, merged below into the starting policy's weights.
    trainer.save_model(str(work / "final"))

    if trainer.accelerator.is_main_process:
        if deepspeed:  # training is over: under ZeRO-3, from_pretrained (the merge's) would
            # partition the weights with zero.Init and wait for ranks that are not loading
            from transformers.integrations.deepspeed import unset_hf_deepspeed_config

            unset_hf_deepspeed_config()
        with atomic.path(out, is_dir=True) as tmp:
            if peft_config is not None:
                shutil.copytree(work / "final", tmp / "adapter")
                merged = merge_adapter(args.policy, tmp / "adapter", cfg["model"])
                merged.save_pretrained(tmp / "model")
                tok.save_pretrained(tmp / "model")
            else:
                shutil.copytree(work / "final", tmp / "model")
            policy.write_spec(tmp, "model", args.round, adapter_of=args.policy if peft_config is not None else None)
            # an objective's earlier passes first (full_information's decision_epochs)
            history = getattr(trainer, "earlier_log", []) + trainer.state.log_history
            pd.DataFrame(history).assign(**figures).to_csv(tmp / "train_log.csv", index=False)
            shutil.copytree(work / "tensorboard", tmp / "tensorboard")
        shutil.rmtree(work, ignore_errors=True)
        acc = trainer.accelerator
        how = "" if acc.num_processes == 1 and not deepspeed else f", {acc.distributed_type.value}"  # MULTI_CPU, ...
        how += f" ZeRO-{acc.state.deepspeed_plugin.zero_stage}" if deepspeed else ""
        print(
            f"grpo_train: round {args.round}, {tr['objective']} on {len(sizes)} groups x {group}, "
            f"{trainer.state.global_step} steps "
            f"on {acc.num_processes} process(es){how} ({figures_text(figures)}) -> {args.out}{cli.device_note()}"
        )
    trainer.accelerator.wait_for_everyone()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
        # Every rank has written what it writes and met the others. Gloo's worker threads can
        # outlive the call above (a core dump showed four still running: something, DeepSpeed
        # by the look of it, keeps handles on the groups), and one that drops the last
        # reference to a finished all-gather while the interpreter shuts down must take the
        # GIL, cannot, and aborts its rank: "terminate called without an active exception",
        # SIGABRT (1 in 80 ZeRO-3 runs here; gdb on the core showed ProcessGroupGloo's
        # AsyncWork destructor in take_gil under Py_FinalizeEx; the same abort is
        # pytorch/pytorch#179291, a fix abandoned). So the workers end without the
        # interpreter's shutdown: flush, then exit 0.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    cli.run(main)
