"""Crash safety: kill stages with SIGKILL part-way through, rerun, and get a complete, valid run."""

import os
import signal
import subprocess
import time

import duckdb
import pandas as pd
import psutil
import pytest

from conftest import ROOT, run, tiny_config, write_config

pytestmark = pytest.mark.slow  # the DAG, killed and rerun


def _snakemake_cmd(d):
    return ["snakemake", "-s", str(ROOT / "Snakefile"), "--configfile", str(d / "config.yaml"), "--cores", "2"]


def _kill_while_writing(d, stage, whole_run, temporaries):
    """Start the pipeline and SIGKILL the ``stage`` job (or the whole run) once one of its
    outputs' atomic temporaries exists (glob ``temporaries`` under ``d``): part-way through
    writing it, the moment a crash could leave half an artifact. The writer holds that
    temporary (HITCHHIKER_HOLD_WRITING, hitchhiker/artifacts.py), which a tiny run's writes
    keep for milliseconds. Returns the output whose temporary was seen. (Killed at a fixed
    delay after start, a stage dies while importing torch, with nothing half-written.)"""
    name = temporaries.rsplit("/", 1)[-1][1:].removesuffix(".*")
    proc = subprocess.Popen(
        _snakemake_cmd(d), cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "HITCHHIKER_HOLD_WRITING": name},
    )  # fmt: skip
    deadline = time.time() + 300
    victim, seen = None, []
    while not (victim and seen):
        assert proc.poll() is None and time.time() < deadline, f"{stage} never started writing {temporaries}"
        if victim is None:
            for p in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if f"hitchhiker.stages.{stage}" in " ".join(p.cmdline()):
                        victim = p
                        break
                except psutil.NoSuchProcess:
                    continue
        seen = list(d.glob(temporaries)) if victim else []
        time.sleep(0.05)
    output = seen[0].parent / seen[0].name[1 : seen[0].name.rindex(".")]  # atomic.path's ".<name>.<random>"
    if whole_run:  # a preempted node: Snakemake and every job die at once
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        run(*_snakemake_cmd(d), "--unlock", cwd=d)  # what a user does after a killed Snakemake
        return output
    for p in [victim, *victim.children(recursive=True)]:  # a job killed by the scheduler: its shell and children
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue
    proc.wait(timeout=240)
    assert proc.returncode != 0
    return output


def test_killed_stages_leave_no_half_artifacts_and_the_rerun_completes(tmp_path):
    write_config(tmp_path / "config.yaml", tiny_config(rounds=2))
    res = tmp_path / "results" / "tiny"
    for stage, whole_run, temporaries in [
        ("build_states", True, "results/tiny/.states.parquet.*"),
        ("rollout", False, "results/tiny/rollouts/.round_1.parquet.*"),
        ("grpo_train", True, "results/tiny/policy/.round_1.*"),
        ("score", True, "results/tiny/buffer/.round_2.duckdb.*"),
        ("evaluate", False, "results/tiny/eval/round_*/.predictions.parquet.*"),
    ]:
        output = _kill_while_writing(tmp_path, stage, whole_run, temporaries)
        assert not output.exists(), f"killed {stage} left {output}"
    run(*_snakemake_cmd(tmp_path), cwd=tmp_path)
    assert "Nothing to be done" in run(*_snakemake_cmd(tmp_path), "-n", cwd=tmp_path).stdout
    for parquet in res.rglob("*.parquet"):
        assert len(pd.read_parquet(parquet)) > 0
    with duckdb.connect(str(res / "buffer" / "round_2.duckdb"), read_only=True) as con:
        counts = con.execute(
            "SELECT round, count(*), count(DISTINCT (state_id, sample_idx)) FROM scores GROUP BY round ORDER BY round"
        ).fetchall()
    assert counts == [(1, 32, 32), (2, 32, 32)]
    assert (res / "metrics.json").exists()
    # temporaries of killed writers are swept by the next writer of the same artifact
    assert not [p for p in res.rglob(".*") if p.name != ".snakemake_timestamp"]
