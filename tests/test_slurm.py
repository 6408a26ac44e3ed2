"""The pipeline on a real (single-node) Slurm cluster, through profiles/slurm.

tests/slurm/start-cluster.sh installs Debian's slurmctld, slurmd and munge and starts a
one-node cluster on localhost; this needs root, so the test skips, saying why, elsewhere.
"""

import json
import os
import subprocess

import pytest

from conftest import ROOT, run, tiny_config, write_config

pytestmark = pytest.mark.slow  # a real Slurm cluster runs the DAG

# The test cluster has no GPU and little memory: the GPU stages' requests are lowered in the
# run's config (its resources section, as a user's would be), the others' on the command line;
# every other Slurm setting is the shipped profile's.
CPU_CLUSTER = [
    "--slurm-no-account", "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
    "--seconds-between-status-checks", "2", "--jobs", "2", "--default-resources", "mem_mb=1000", "runtime=30",
]  # fmt: skip
CPU_JOBS = {stage: {"gpu": 0, "mem_mb": 1000, "runtime": 30} for stage in ("rollout", "grpo_train", "evaluate")}


def _slurm_jobs(after: int) -> list[tuple[int, str, str]]:
    out = subprocess.run(["squeue", "-t", "all", "-h", "-o", "%i|%k|%T"], capture_output=True, text=True, check=True)
    jobs = [line.split("|") for line in out.stdout.split()]
    return sorted((int(i), comment, state) for i, comment, state in jobs if int(i) > after)


def test_pipeline_runs_as_slurm_jobs_and_matches_a_local_run(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("installing and starting Slurm needs root")
    run("bash", ROOT / "tests" / "slurm" / "start-cluster.sh")
    before = max([i for i, _, _ in _slurm_jobs(-1)], default=0)
    slurm, local = tmp_path / "slurm", tmp_path / "local"
    for d in (slurm, local):
        d.mkdir()
        write_config(d / "config.yaml", tiny_config(resources=CPU_JOBS))
    cmd = ["snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml"]
    # the local run alongside: the Slurm run spends most of its time waiting on the scheduler
    local_run = subprocess.Popen([str(c) for c in (*cmd, "--cores", "2")], cwd=local, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)  # fmt: skip
    run(*cmd, "--profile", ROOT / "profiles" / "slurm", *CPU_CLUSTER, cwd=slurm)
    local_out, _ = local_run.communicate(timeout=600)
    assert local_run.returncode == 0, local_out[-3000:]

    jobs = _slurm_jobs(before)
    rules = sorted(comment.removeprefix("rule_") for _, comment, _ in jobs)
    assert rules == sorted([
        "audit", "base_model", "build_states", "evaluate_wildcards_0", "evaluate_wildcards_1",
        "grpo_train_wildcards_1", "rollout_wildcards_1", "score_wildcards_1", "summarize",
    ])  # fmt: skip
    assert {state for _, _, state in jobs} == {"COMPLETED"}

    a, b = slurm / "results" / "tiny", local / "results" / "tiny"
    for rel in ("prices.parquet", "states.parquet", "outcomes.parquet", "audit.json",
                "rollouts/round_1.parquet", "policy/round_1/model/model.safetensors",
                "eval/round_1/predictions.parquet"):  # fmt: skip
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert json.loads((a / "metrics.json").read_text()) == json.loads((b / "metrics.json").read_text())


def test_dry_run_shows_what_each_rule_asks_slurm_for(tmp_path):
    write_config(tmp_path / "config.yaml", tiny_config())
    out = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", "config.yaml", "--profile",
              ROOT / "profiles" / "slurm", "-n", "--quiet", "host", cwd=tmp_path).stdout  # fmt: skip
    asks = {}
    for block in out.split("\nrule ")[1:]:
        name = block.split(":", 1)[0]
        res = dict(kv.split("=", 1) for kv in block.split("resources: ", 1)[1].split("\n", 1)[0].split(", "))
        asks[name] = res
    for gpu_rule, mem, runtime in (("rollout", "64000", "120"), ("grpo_train", "128000", "480"),
                                   ("evaluate", "64000", "60")):  # fmt: skip
        assert asks[gpu_rule]["gpu"] == "1" and asks[gpu_rule]["cpus_per_gpu"] == "8"
        assert asks[gpu_rule]["mem_mb"] == mem and asks[gpu_rule]["runtime"] == runtime
    for rule, res in asks.items():
        assert "tasks" not in res, f"{rule} asks for tasks: the plugin would start that many copies"
        if rule not in ("rollout", "grpo_train", "evaluate"):
            assert "gpu" not in res and res["mem_mb"] == "8000"
