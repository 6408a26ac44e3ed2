"""grpo_train: the replayed groups are the stored ones, and training moves the policy."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pandas as pd
import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoModelForCausalLM

from conftest import prompts_of, rollout_round1, stage, tiny_config, write_config
from hitchhiker import policy
from hitchhiker.buffer import replay
from hitchhiker.stages.grpo_train import last_complete_checkpoint
from hitchhiker.training.objectives.grpo import replay_rollout_func


def _samples(states=3, group=4):
    rows = []
    for s in range(states):
        for k in range(group):
            rows.append(
                dict(
                    group=f"s{s}",
                    state_id=f"s{s}",
                    sample_idx=k,
                    prompt_ids=[s, 0],
                    completion_ids=[s, k, 99],
                    logprobs=[-0.1 * k] * 3,
                    model_mask=[1, 1, 1],
                    reward=float(10 * s + k),
                )
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("processes, per_process", [(1, 12), (2, 6), (3, 4), (4, 3)])
def test_rollout_func_replays_each_group_in_sample_order(processes, per_process):
    # TRL's RepeatSampler lays each state's group out contiguously; the processes' slices
    # follow each other (a group may straddle two processes).
    func = replay_rollout_func(_samples(), 4)
    batch = [f"s{s}" for s in range(3) for _ in range(4)]
    got = []
    for p in range(processes):
        trainer = SimpleNamespace(accelerator=SimpleNamespace(process_index=p))
        out = func(batch[p * per_process : (p + 1) * per_process], trainer)
        got += out["env_reward"]
        assert len(out["completion_ids"]) == per_process
    assert got == [float(10 * s + k) for s in range(3) for k in range(4)]


def test_rollout_func_rejects_a_misaligned_batch():
    func = replay_rollout_func(_samples(), 4)
    with pytest.raises(RuntimeError, match="misaligned"):
        func(["s0", "s0", "s1", "s1"], SimpleNamespace(accelerator=SimpleNamespace(process_index=0)))


def _round1_buffer(cfg, base_run, tmp_path):
    """Round 1 rolled out and scored, rewards replaced by a learnable signal."""
    rollouts, buffer = tmp_path / "r.parquet", tmp_path / "b.duckdb"
    rollout_round1(cfg, base_run, rollouts)
    stage(
        "score",
        "--config",
        cfg,
        "--round",
        "1",
        "--rollouts",
        rollouts,
        "--states",
        base_run / "states.parquet",
        "--outcomes",
        base_run / "outcomes.parquet",
        "--prompts",
        prompts_of(rollouts),
        "--out",
        buffer,
    )
    # the random tiny model rarely answers validly, so every reward would be the penalty and
    # every advantage zero: pay for a low first token instead, to give GRPO a signal. (Not for
    # short completions: an EOS within 6 tokens is luck, one group in eight had one on the CPU's
    # draws and none on a GPU's, where every advantage was zero and no weight moved.)
    with duckdb.connect(str(buffer)) as con:
        con.execute(
            "UPDATE scores SET reward = -r.completion_ids[1] / 100 FROM rollouts r "
            "WHERE r.state_id = scores.state_id AND r.sample_idx = scores.sample_idx"
        )
    return buffer


@pytest.mark.slow
@pytest.mark.parametrize("lora", [True, False])
def test_grpo_train_cli_updates_the_policy(base_run, tmp_path, lora):
    cfg = write_config(
        tmp_path / "c.yaml",
        tiny_config(train={**tiny_config()["train"], "lora": {"enabled": lora, "r": 4, "alpha": 8}}),
    )
    buffer, out = _round1_buffer(cfg, base_run, tmp_path), tmp_path / "policy"
    stage(
        "grpo_train",
        "--config",
        cfg,
        "--round",
        "1",
        "--buffer",
        buffer,
        "--policy",
        base_run / "policy" / "round_0",
        "--out",
        out,
    )
    before = load_file(base_run / "policy" / "round_0" / "model" / "model.safetensors")
    after = load_file(out / "model" / "model.safetensors")
    assert before.keys() == after.keys()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "training left every weight unchanged"
    assert (out / "adapter" / "adapter_config.json").exists() == lora
    log = pd.read_csv(out / "train_log.csv").dropna(subset=["reward"])
    assert len(log) and "sampling/importance_sampling_ratio/mean" in log.columns
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tb = events.Scalars("train/reward")
    assert [e.step for e in tb] == log["step"].tolist()
    assert [e.value for e in tb] == pytest.approx(log["reward"].tolist(), rel=1e-6)
    assert "train/sampling/importance_sampling_ratio/capped_frac" in events.Tags()["scalars"]
    assert not list(tmp_path.glob(".policy*")), "temporary training files left behind"
    if lora:  # the adapter on the starting weights is the merged model (what vLLM's LoRA path loads)
        base_ref, adapter = policy.lora_adapter(out)
        assert Path(base_ref).resolve() == (base_run / "policy" / "round_0" / "model").resolve()
        base = AutoModelForCausalLM.from_pretrained(base_ref)
        merged = AutoModelForCausalLM.from_pretrained(out / "model")
        ids = torch.tensor([[5, 9, 17, 33, 2, 41]])
        with torch.no_grad():
            adapted = PeftModel.from_pretrained(base, adapter)(ids).logits
            torch.testing.assert_close(adapted, merged(ids).logits, atol=1e-5, rtol=1e-4)
    else:
        assert policy.lora_adapter(out) is None


@pytest.mark.slow
def test_two_cpu_processes_train_on_the_same_data_as_one(base_run, tmp_path):
    train = {**tiny_config()["train"], "lora": {"enabled": False}}
    one = write_config(tmp_path / "one.yaml", tiny_config(train={**train, "per_device_batch_size": 16}))
    two = write_config(
        tmp_path / "two.yaml", tiny_config(train={**train, "per_device_batch_size": 8, "num_processes": 2})
    )
    buffer = _round1_buffer(one, base_run, tmp_path)
    logs, weights = [], []
    for n, cfg in ((1, one), (2, two)):
        out = tmp_path / f"policy_{n}"
        proc = stage("launch", "--nproc", n, "--", "--config", cfg, "--round", "1", "--buffer", buffer,
                     "--policy", base_run / "policy" / "round_0", "--out", out)  # fmt: skip
        assert ("torch.distributed.run" in proc.stdout) == (n == 2)  # two gloo workers (torchrun), not accelerate's one
        log = pd.read_csv(out / "train_log.csv").dropna(subset=["reward"])
        logs.append(log.reset_index(drop=True))
        weights.append(load_file(out / "model" / "model.safetensors"))
    # the same global batch at every step: the same groups, so the same rewards, in the same order
    assert len(logs[0]) == len(logs[1]) >= 2
    pd.testing.assert_series_equal(logs[0]["reward"], logs[1]["reward"], rtol=1e-6)
    pd.testing.assert_series_equal(logs[0]["reward_std"], logs[1]["reward_std"], rtol=1e-5)
    for k in weights[0]:  # and nearly the same update (two processes average two half-batch gradients)
        torch.testing.assert_close(weights[0][k], weights[1][k], rtol=0, atol=5e-3)


def test_the_sampler_gives_each_epoch_the_order_an_uninterrupted_run_gives_it():
    """A fresh sampler told its epoch (as a resumed run's is) draws what TRL's sampler draws at
    that pass, and TRL's draws go on changing from epoch to epoch."""
    from trl.trainer.utils import RepeatSampler

    from hitchhiker.training.replay_trainer import ResumableRepeatSampler

    def args():
        return dict(data_source=range(10), mini_repeat_count=4, batch_size=2, repeat_count=1, seed=7)

    trl = RepeatSampler(**args())
    uninterrupted = [list(trl) for _ in range(4)]
    assert len({tuple(order) for order in uninterrupted}) == 4
    for epoch, order in enumerate(uninterrupted):
        resumed = ResumableRepeatSampler(**args())
        resumed.set_epoch(epoch)
        assert list(resumed) == order


@pytest.mark.slow
def test_a_killed_run_resumes_from_any_checkpoint_and_ends_with_the_same_weights(base_run, tmp_path):
    """Resumed from inside the first epoch, at its end and inside the second, the run ends at
    the uninterrupted run's weights. The tiny config trains 4 steps an epoch, 2 epochs: the kill
    lands after checkpoint-6, and copies of its checkpoints cut at 3 and 4 give the other two
    resume points without depending on when the kill lands."""
    train = {**tiny_config()["train"], "lora": {"enabled": False}, "epochs": 2, "save_steps": 1}
    cfg = write_config(tmp_path / "c.yaml", tiny_config(train=train))
    buffer = _round1_buffer(cfg, base_run, tmp_path)
    common = ["--config", cfg, "--round", "1", "--buffer", buffer, "--policy", base_run / "policy" / "round_0"]
    stage("grpo_train", *common, "--out", tmp_path / "whole")
    whole = load_file(tmp_path / "whole" / "model" / "model.safetensors")

    killed = [
        sys.executable,
        "-m",
        "hitchhiker.stages.grpo_train",
        *map(str, common),
        "--out",
        str(tmp_path / "killed"),
    ]
    # Held before its policy is written (tests/test_crash.py's fault injection), so the kill lands
    # with the checkpoints in place however fast the tiny model trains. The sixth must be whole:
    # its trainer_state.json exists from the moment transformers opens it, before it is written.
    hold = {**os.environ, "HITCHHIKER_HOLD_WRITING": "killed"}
    proc = subprocess.Popen(killed, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=hold)
    work = tmp_path / ".killed-trainer"
    deadline = time.time() + 300
    while int((last_complete_checkpoint(work) or "-0").split("-")[-1]) < 6:
        assert proc.poll() is None and time.time() < deadline, "grpo_train ended before its sixth checkpoint"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert not (tmp_path / "killed").exists()
    for step in (3, 4):
        copy = shutil.copytree(work, tmp_path / f".cut{step}-trainer")
        for later in copy.glob("checkpoint-*"):
            if int(later.name.split("-")[1]) > step:
                shutil.rmtree(later)
    for name, step in (("cut3", "3"), ("cut4", "4"), ("killed", "[678]")):  # the kill lands after 6
        again = stage("grpo_train", *common, "--out", tmp_path / name)
        assert re.search(f"resuming from checkpoint-{step}\\b", again.stdout), (name, again.stdout)
        assert not (tmp_path / f".{name}-trainer").exists()  # checkpoints go once the policy is written
        resumed = load_file(tmp_path / name / "model" / "model.safetensors")
        greatest = max(float((resumed[k] - whole[k]).abs().max()) for k in whole)
        assert greatest <= 1e-6, f"resumed from {name}: weights differ by up to {greatest:.3g}"


@pytest.mark.slow
def test_checkpoints_of_other_inputs_are_not_resumed(base_run, tmp_path):
    train = {**tiny_config()["train"], "lora": {"enabled": False}, "save_steps": 1}
    cfg = write_config(tmp_path / "c.yaml", tiny_config(train=train))
    buffer = _round1_buffer(cfg, base_run, tmp_path)
    stale = tmp_path / ".policy-trainer" / "checkpoint-99"
    stale.mkdir(parents=True)
    (tmp_path / ".policy-trainer" / "inputs.json").write_text("{}")  # another config's checkpoints
    proc = stage("grpo_train", "--config", cfg, "--round", "1", "--buffer", buffer,
                 "--policy", base_run / "policy" / "round_0", "--out", tmp_path / "policy")  # fmt: skip
    assert "resuming" not in proc.stdout and (tmp_path / "policy" / "model").is_dir()


def _train(cfg, buffer, base_run, out):
    stage("grpo_train", "--config", cfg, "--round", "1", "--buffer", buffer,
          "--policy", base_run / "policy" / "round_0", "--out", out)  # fmt: skip
    return load_file(out / "model" / "model.safetensors"), pd.read_csv(out / "train_log.csv")


@pytest.mark.slow
def test_importance_sampling_reweights_stale_samples_as_it_should(base_run, tmp_path):
    # sampled at exactly the training temperature, so the stored logprobs are on-policy; a small
    # learning rate keeps the policy near them, where a capped ratio of 2 is a doubled reward
    train = {**tiny_config()["train"], "lora": {"enabled": False}, "learning_rate": 0.001}
    on = tiny_config(rollout={**tiny_config()["rollout"], "temperature_eps": 0.0}, train=train)
    off = tiny_config(rollout=on["rollout"], train={**train, "importance_sampling": {"enabled": False}})
    cfg_on, cfg_off = write_config(tmp_path / "on.yaml", on), write_config(tmp_path / "off.yaml", off)
    buffer = _round1_buffer(cfg_on, base_run, tmp_path)

    w_on, log_on = _train(cfg_on, buffer, base_run, tmp_path / "on")
    ratio = log_on["sampling/importance_sampling_ratio/mean"].dropna()
    # on-policy at the first step (pi / mu = 1), and drifting only as the policy moves
    assert ratio.iloc[0] == pytest.approx(1.0, abs=1e-4) and np.allclose(ratio, 1.0, atol=0.01)
    assert (log_on["sampling/importance_sampling_ratio/capped_frac"].dropna() == 0).all()

    # make half the states stale: their behaviour policy was e times less likely per token,
    # so every token's ratio is about e, truncated to the cap 2 ...
    with duckdb.connect(str(buffer), read_only=True) as con:
        states = [r[0] for r in con.execute("SELECT DISTINCT state_id FROM rollouts ORDER BY 1").fetchall()]
    stale_ids = states[: len(states) // 2]
    stale, doubled = tmp_path / "stale.duckdb", tmp_path / "doubled.duckdb"
    for path, sql in (
        (
            stale,
            "UPDATE rollouts SET logprobs = list_transform(logprobs, lambda x: x - 1.0)"
            " WHERE list_contains(?, state_id)",
        ),
        (doubled, "UPDATE scores SET reward = 2 * reward WHERE list_contains(?, state_id)"),
    ):
        shutil.copyfile(buffer, path)
        with duckdb.connect(str(path)) as con:
            con.execute(sql, [stale_ids])
    w_stale, log_stale = _train(cfg_on, stale, base_run, tmp_path / "stale")
    assert log_stale["sampling/importance_sampling_ratio/max"].dropna().max() == pytest.approx(2.0)
    assert log_stale["sampling/importance_sampling_ratio/capped_frac"].dropna().mean() > 0.3
    # ... which weighs those groups' loss twice: the same update as doubling their advantages,
    # that is (scale_rewards none) doubling their rewards, with no correction
    w_doubled, _ = _train(cfg_off, doubled, base_run, tmp_path / "doubled")
    # per tensor (Adam turns a near-zero gradient's noise into a step of about the learning rate,
    # so single weights can differ): the stale run lands by the doubled one, far from the on-policy
    # run (uncorrected, it would land on that; uncapped, at e rather than 2, well past the doubled)
    for k in w_on:
        apart, moved = (w_stale[k] - w_doubled[k]).norm(), (w_stale[k] - w_on[k]).norm()
        assert moved > 1e-4 and apart < moved / 5, (k, apart, moved)


@pytest.mark.slow
def test_the_replay_window_trains_on_the_last_rounds_even_when_a_state_repeats(base_run, tmp_path):
    train = {**tiny_config()["train"], "lora": {"enabled": False}, "replay_rounds": 2}
    cfg = write_config(tmp_path / "c.yaml", tiny_config(train=train))
    buffer = _round1_buffer(cfg, base_run, tmp_path)
    with duckdb.connect(str(buffer)) as con:  # round 2 rolled out the very same states again
        for table in ("prompts", "rollouts", "scores"):
            con.execute(f"INSERT INTO {table} SELECT * REPLACE (2 AS round) FROM {table} WHERE round = 1")
    samples = replay(str(buffer), "tiny", 2, rounds=2)
    assert samples.group.nunique() == 16 and set(samples["round"]) == {1, 2}
    assert len(replay(str(buffer), "tiny", 2, rounds=1).group.unique()) == 8
    shutil.copytree(base_run / "policy" / "round_0", tmp_path / "round_1")  # the base model as round 1's policy
    policy.write_spec(tmp_path / "round_1", policy.read_spec(tmp_path / "round_1")["model"], 1)
    proc = stage("grpo_train", "--config", cfg, "--round", "2", "--buffer", buffer,
                 "--policy", tmp_path / "round_1", "--out", tmp_path / "policy")  # fmt: skip
    assert "round 2, grpo on 16 groups x 4" in proc.stdout


@pytest.mark.slow
def test_dynamic_sampling_trains_on_exactly_the_groups_whose_rewards_differ(base_run, tmp_path):
    train = {**tiny_config()["train"], "lora": {"enabled": False}}
    dynamic = tiny_config(rollout={**tiny_config()["rollout"], "dynamic_sampling": 2}, train=train)
    cfg, plain = (
        write_config(tmp_path / "dynamic.yaml", dynamic),
        write_config(tmp_path / "plain.yaml", tiny_config(train=train)),
    )
    full, kept = _round1_buffer(cfg, base_run, tmp_path), tmp_path / "kept.duckdb"
    with duckdb.connect(str(full)) as con:
        # rollout drew further states (2 x 8 at most) until 8 groups' environment rewards differed
        spread = con.execute("SELECT max(environment_reward) > min(environment_reward) FROM scores GROUP BY state_id")
        informative = [r[0] for r in spread.fetchall()]
        assert 8 <= len(informative) <= 16 and (sum(informative) >= 8 or len(informative) == 16)
        assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == len(informative)
        # then half the groups paid alike: every sample the same reward
        states = [r[0] for r in con.execute("SELECT DISTINCT state_id FROM scores ORDER BY 1").fetchall()]
        flat = states[::2]
        con.execute("UPDATE scores SET reward = 0.02 WHERE list_contains(?, state_id)", [flat])
    shutil.copyfile(full, kept)
    with duckdb.connect(str(kept)) as con:  # the same buffer without them
        for table in ("prompts", "rollouts", "scores"):
            con.execute(f"DELETE FROM {table} WHERE list_contains(?, state_id)", [flat])
    w_dynamic, log = _train(cfg, full, base_run, tmp_path / "dynamic")
    w_kept, _ = _train(plain, kept, base_run, tmp_path / "kept")
    w_all, _ = _train(plain, full, base_run, tmp_path / "all")
    assert all(torch.equal(w_dynamic[k], w_kept[k]) for k in w_kept)  # trained on exactly the others
    assert any(not torch.equal(w_dynamic[k], w_all[k]) for k in w_all)
    assert (
        log["rollout/groups"].eq(len(states)).all() and log["rollout/trained_groups"].eq(len(states) - len(flat)).all()
    )
    assert log["rollout/zero_spread"].iloc[0] == pytest.approx(len(flat) / len(states))
    assert {"rollout/action_entropy", "rollout/top_action", "rollout/top_action_share"} <= set(log.columns)


def test_a_checkpoint_cut_short_by_a_kill_is_not_resumed(tmp_path):
    for step, state in ((2, "{}"), (3, '{"global_step": 3}'), (4, None), (5, '{"global_st')):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"")
        if state is not None:
            (d / "trainer_state.json").write_text(state)
    assert last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-3")
    assert last_complete_checkpoint(tmp_path / "none") is None


@pytest.mark.slow
def test_environment_tokens_count_neither_in_the_loss_nor_in_the_correction(base_run, tmp_path):
    """A multi-turn trajectory's environment tokens (model_mask 0, TRL's env_mask): their stored
    logprobs change nothing, while the same logprobs on the model's tokens change the update."""
    cfg = write_config(tmp_path / "c.yaml", tiny_config(train={**tiny_config()["train"], "lora": {"enabled": False}}))
    buffer = _round1_buffer(cfg, base_run, tmp_path)
    with duckdb.connect(str(buffer), read_only=True) as con:
        ro = con.execute("SELECT state_id, sample_idx, completion_ids, logprobs FROM rollouts").df()
    ends = ro.completion_ids.map(len).clip(upper=2)  # the last (up to) two tokens: the environment's
    variants = {
        "masked": (lambda n, e: [1] * (n - e) + [0] * e, lambda lp, e: list(lp)),
        "garbage": (lambda n, e: [1] * (n - e) + [0] * e, lambda lp, e: list(lp[: len(lp) - e]) + [-50.0] * e),
        "counted": (lambda n, e: [1] * n, lambda lp, e: list(lp[: len(lp) - e]) + [-50.0] * e),
    }
    weights = {}
    for name, (mask, logps) in variants.items():
        path = tmp_path / f"{name}.duckdb"
        shutil.copyfile(buffer, path)
        new = ro.assign(
            model_mask=[mask(len(c), e) for c, e in zip(ro.completion_ids, ends, strict=True)],
            logprobs=[logps(lp, e) for lp, e in zip(ro.logprobs, ends, strict=True)],
        )[["state_id", "sample_idx", "model_mask", "logprobs"]]
        with duckdb.connect(str(path)) as con:
            con.register("new", new)
            con.execute("UPDATE rollouts SET model_mask = new.model_mask, logprobs = new.logprobs FROM new "
                        "WHERE rollouts.state_id = new.state_id AND rollouts.sample_idx = new.sample_idx")  # fmt: skip
        weights[name], _ = _train(cfg, path, base_run, tmp_path / name)
    for k in weights["masked"]:
        torch.testing.assert_close(weights["garbage"][k], weights["masked"][k], rtol=0, atol=0)
    assert any(not torch.equal(weights["counted"][k], weights["masked"][k]) for k in weights["masked"])
