"""grpo_train: the replayed groups are the stored ones, and training moves the policy."""

import subprocess
import sys
import time
from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from conftest import prompts_of, rollout_round1, stage, tiny_config, write_config
from hitchhiker.grpo_train import replay_rollout_func


def _samples(states=3, group=4):
    rows = []
    for s in range(states):
        for k in range(group):
            rows.append(
                dict(
                    state_id=f"s{s}",
                    sample_idx=k,
                    prompt_ids=[s, 0],
                    completion_ids=[s, k, 99],
                    logprobs=[-0.1 * k] * 3,
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
    # every advantage zero: pay for short completions instead, to give GRPO a signal
    with duckdb.connect(str(buffer)) as con:
        con.execute(
            "UPDATE scores SET reward = -len(r.completion_ids) / 10 FROM rollouts r "
            "WHERE r.state_id = scores.state_id AND r.sample_idx = scores.sample_idx"
        )
    return buffer


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
    log = pd.read_csv(out / "train_log.csv")
    assert "reward" in log.columns and log["reward"].notna().any()
    assert not list(tmp_path.glob(".policy*")), "temporary training files left behind"


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
        assert ("torchrun" in proc.stdout) == (n == 2)  # two gloo workers, not accelerate's single one
        log = pd.read_csv(out / "train_log.csv").dropna(subset=["reward"])
        logs.append(log.reset_index(drop=True))
        weights.append(load_file(out / "model" / "model.safetensors"))
    # the same global batch at every step: the same groups, so the same rewards, in the same order
    assert len(logs[0]) == len(logs[1]) >= 2
    pd.testing.assert_series_equal(logs[0]["reward"], logs[1]["reward"], rtol=1e-6)
    pd.testing.assert_series_equal(logs[0]["reward_std"], logs[1]["reward_std"], rtol=1e-5)
    for k in weights[0]:  # and nearly the same update (two processes average two half-batch gradients)
        torch.testing.assert_close(weights[0][k], weights[1][k], rtol=0, atol=5e-3)


def test_a_killed_run_resumes_from_its_last_checkpoint_and_ends_with_the_same_weights(base_run, tmp_path):
    train = {**tiny_config()["train"], "lora": {"enabled": False}, "epochs": 2, "save_steps": 1}
    cfg = write_config(tmp_path / "c.yaml", tiny_config(train=train))
    buffer = _round1_buffer(cfg, base_run, tmp_path)
    common = ["--config", cfg, "--round", "1", "--buffer", buffer, "--policy", base_run / "policy" / "round_0"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    stage("grpo_train", *common, "--out", whole)

    proc = subprocess.Popen([sys.executable, "-m", "hitchhiker.grpo_train", *map(str, common), "--out", str(resumed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    work = tmp_path / ".resumed-trainer"
    deadline = time.time() + 300
    while not (work / "checkpoint-3" / "trainer_state.json").exists():
        assert proc.poll() is None and time.time() < deadline, "grpo_train ended before its third checkpoint"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert not resumed.exists()
    again = stage("grpo_train", *common, "--out", resumed)
    assert "resuming from checkpoint-" in again.stdout
    assert not work.exists()  # checkpoints go once the policy is written
    a, b = (load_file(d / "model" / "model.safetensors") for d in (whole, resumed))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)


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
