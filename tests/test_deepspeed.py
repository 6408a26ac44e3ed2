"""Real DeepSpeed on the CPU: grpo_train under the shipped ZeRO-2 and ZeRO-3 accelerate configs,
two gloo workers, against the same two workers without DeepSpeed (torchrun, DDP).

DeepSpeed and its CPU accelerator come from envs/install-cpu-engines (README command 2). The
launch is the one the grpo_train rule makes (hitchhiker.launch). The tiny model is trained
with every weight free, so ZeRO-3 shards all of it and must gather it again to save it.
Tolerance: fp32 on both sides; the sharded optimizer only changes the order of float
additions, so the weights may differ by rounding (1e-5 absolute, against steps that move them
by about 1e-2).
"""

import os

import pytest
import torch
from safetensors.torch import load_file

from conftest import ROOT, prompts_of, run, stage, tiny_config, write_config
from hitchhiker import policy

pytestmark = pytest.mark.slow  # DeepSpeed ZeRO-2/3 training runs

CONFIGS = {"zero2": 2, "zero3": 3}


def launch(d, name, *accelerate_config):
    """grpo_train round 1 on two workers, as the rule launches it, into d / name."""
    extra = ["--accelerate-config", *accelerate_config] if accelerate_config else []
    return stage("launch", "--nproc", "2", *extra, "--", "--config", d / "c.yaml", "--round", "1", "--buffer",
                 d / "b.duckdb", "--policy", d / "policy" / "round_0", "--out", d / name)  # fmt: skip


@pytest.fixture(scope="module")
def replay(base_run, tmp_path_factory):
    """Round 1 rolled out and scored once, and trained on two workers without DeepSpeed. The
    base policy is warmed up on the answer format (both labels, every position word), so that
    its groups' rewards differ by construction, not by the luck of a random model's text."""
    d = tmp_path_factory.mktemp("deepspeed")
    cfg = tiny_config(train={"lora": {"enabled": False}, "num_processes": 2, "per_device_batch_size": 4})
    cfg["model"]["tiny"]["format_warmup_steps"] = 40
    write_config(d / "c.yaml", cfg)
    stage("base_model", "--config", d / "c.yaml", "--out", d / "policy" / "round_0")
    stage("rollout", "--config", d / "c.yaml", "--round", "1", "--states", base_run / "states.parquet",
          "--outcomes", base_run / "outcomes.parquet", "--policy", d / "policy" / "round_0",
          "--out", d / "r.parquet", "--prompts", prompts_of(d / "r.parquet"))  # fmt: skip
    stage("score", "--config", d / "c.yaml", "--round", "1", "--rollouts", d / "r.parquet", "--states",
          base_run / "states.parquet", "--outcomes", base_run / "outcomes.parquet", "--prompts",
          prompts_of(d / "r.parquet"), "--out", d / "b.duckdb")  # fmt: skip
    import duckdb

    with duckdb.connect(str(d / "b.duckdb"), read_only=True) as con:  # the premise: groups to learn from
        spread = con.execute("SELECT count(*) FROM (SELECT state_id FROM scores GROUP BY state_id "
                             "HAVING max(reward) > min(reward))").fetchall()[0][0]  # fmt: skip
    assert spread > 0
    out = launch(d, "ddp").stdout
    assert "on 2 process(es), MULTI_CPU" in out
    assert f", {max(1, len(os.sched_getaffinity(0)) // 2)} CPU thread(s)" in out  # the cores shared, not each all
    return d


def weights(policy_dir):
    return {k: v.float() for f in (policy_dir / "model").glob("*.safetensors") for k, v in load_file(f).items()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_grpo_train_under_deepspeed_matches_the_run_without_it(replay, name):
    proc = launch(replay, name, ROOT / "configs" / "accelerate" / f"{name}.yaml")
    assert f"on 2 process(es), DEEPSPEED ZeRO-{CONFIGS[name]}" in proc.stdout, proc.stdout[-2000:]
    ddp, ds, base = weights(replay / "ddp"), weights(replay / name), weights(replay / "policy" / "round_0")
    assert set(ddp) <= set(ds)  # ZeRO-2 also writes out the tied lm_head
    assert max((ddp[k] - base[k]).abs().max().item() for k in ddp) > 1e-3  # training moved the weights
    for k in ddp:
        torch.testing.assert_close(ds[k], ddp[k], rtol=0, atol=1e-5, msg=f"{name}: {k}")
    # the saved model is whole: it loads and gives the run without DeepSpeed's logits
    ids = torch.tensor([[5, 9, 14, 3, 7]])
    model_cfg = {"dtype": "float32", "trust_remote_code": False}
    with torch.no_grad():
        logits = [policy.load(replay / p, model_cfg, "cpu")[0](ids).logits for p in ("ddp", name)]
    torch.testing.assert_close(logits[1], logits[0], rtol=0, atol=1e-4)


def test_the_default_config_trains_under_zero3_on_the_cpu(tmp_path):
    # the default run (SmolLM2, model.dtype fast, LoRA) as a user overlays it: DeepSpeed on the
    # CPU trains in float32 (transformers takes bf16 on a CPU only outside DeepSpeed) and says so
    overlay = {
        "run": "zero3",
        "rounds": 1,
        "data": {"cache_dir": str(ROOT / "data" / "cache")},
        "rollout": {"states_per_round": 2},
        "train": {"accelerate_config": str(ROOT / "configs" / "accelerate" / "zero3.yaml"), "num_processes": 2,
                  "per_device_batch_size": 4},
    }  # fmt: skip
    write_config(tmp_path / "overlay.yaml", overlay)
    run("snakemake", "-s", ROOT / "Snakefile", "--cores", "2", "results/zero3/policy/round_1",
        "--configfile", ROOT / "config.yaml", tmp_path / "overlay.yaml", cwd=tmp_path)  # fmt: skip
    log = (tmp_path / "results" / "zero3" / "logs" / "grpo_train_round_1.log").read_text()
    assert "DeepSpeed on the CPU trains in float32 (model.dtype fast)" in log
    assert "on 2 process(es), DEEPSPEED ZeRO-3" in log, log[-2000:]
    spec = policy.read_spec(tmp_path / "results" / "zero3" / "policy" / "round_1")
    assert spec["round"] == 1 and spec["adapter"] == "adapter"
