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


def _kill_when_running(d, stage, whole_run):
    """Start the pipeline; SIGKILL the ``stage`` job (or the whole run) once it has started."""
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
    time.sleep(0.3)  # part-way: imports done or under way, output not yet moved into place
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
    for stage, whole_run, output in [
        ("build_states", True, res / "states.parquet"),
        ("rollout", False, res / "rollouts" / "round_1.parquet"),
        ("grpo_train", True, res / "policy" / "round_1"),
        ("score", True, res / "buffer" / "round_2.duckdb"),
        ("evaluate", False, None),
    ]:
        _kill_when_running(tmp_path, stage, whole_run)
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
