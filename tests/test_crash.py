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


def _snakemake_cmd(d):
    return ["snakemake", "-s", str(ROOT / "Snakefile"), "--configfile", str(d / "config.yaml"), "--cores", "2"]


def _kill_when_running(d, stage, whole_run, writing=None):
    """Start the pipeline; SIGKILL the ``stage`` job (or the whole run) once it has started, or, given
    ``writing``, once that output's atomic temporary exists (the stage is part-way through writing it)."""
    proc = subprocess.Popen(
        _snakemake_cmd(d), cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 240
    victim = None
    while victim is None and time.time() < deadline and proc.poll() is None:
        for p in psutil.Process(proc.pid).children(recursive=True):
            try:
                if f"hitchhiker.{stage}" in " ".join(p.cmdline()):
                    victim = p
                    break
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    assert victim is not None, f"{stage} never started"
    if writing is None:  # stages that run for seconds: part-way, output not yet moved into place
        time.sleep(0.3)
    else:  # a stage done in ~0.5 s (score) could finish inside any fixed delay; its temporary lives ~50 ms
        while not any(writing.parent.glob(f".{writing.name}.*")):
            assert proc.poll() is None and time.time() < deadline, f"{stage} never started writing {writing}"
            time.sleep(0.001)
    if whole_run:  # a preempted node: Snakemake and every job die at once
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        run(*_snakemake_cmd(d), "--unlock", cwd=d)  # what a user does after a killed Snakemake
        return
    else:  # a job killed by the scheduler (time or memory limit): its shell and its children
        for p in [victim, *victim.children(recursive=True)]:
            p.send_signal(signal.SIGKILL)
    proc.wait(timeout=240)
    assert proc.returncode != 0


@pytest.mark.slow
def test_killed_stages_leave_no_half_artifacts_and_the_rerun_completes(tmp_path):
    write_config(tmp_path / "config.yaml", tiny_config(rounds=2))
    res = tmp_path / "results" / "tiny"
    for stage, whole_run, output, mid_write in [
        ("build_states", True, res / "states.parquet", False),
        ("rollout", False, res / "rollouts" / "round_1.parquet", False),
        ("grpo_train", True, res / "policy" / "round_1", False),
        ("score", True, res / "buffer" / "round_2.duckdb", True),
        ("evaluate", False, None, False),
    ]:
        _kill_when_running(tmp_path, stage, whole_run, output if mid_write else None)
        if output is not None:
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
