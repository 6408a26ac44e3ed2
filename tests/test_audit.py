"""The leakage audit: clean states pass; a state that peeks past its decision date fails the run."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import stage, tiny_config, write_config


def _audit(base_run, tmp_path, states=None, outcomes=None):
    cfg = write_config(tmp_path / "c.yaml", tiny_config())
    s, o = base_run / "states.parquet", base_run / "outcomes.parquet"
    if states is not None:
        states.to_parquet(s := tmp_path / "states.parquet")
    if outcomes is not None:
        outcomes.to_parquet(o := tmp_path / "outcomes.parquet")
    out = tmp_path / "audit.json"
    proc = stage(
        "audit",
        "--config",
        cfg,
        "--data",
        base_run / "prices.parquet",
        "--states",
        s,
        "--outcomes",
        o,
        "--out",
        out,
        check=False,
    )
    return proc, out


def test_clean_states_pass(base_run, tmp_path):
    proc, out = _audit(base_run, tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["states_checked"] == len(pd.read_parquet(base_run / "states.parquet"))
    assert report["train_to_test"]["embargo_periods"] >= 5


def test_a_prompt_showing_the_next_days_return_fails_naming_the_state(base_run, tmp_path):
    states = pd.read_parquet(base_run / "states.parquet")
    prices = pd.read_parquet(base_run / "prices.parquet").pivot(index="date", columns="ticker", values="close")
    victim = states.index[3]
    row = states.loc[victim]
    i = prices.index.get_loc(row.date)
    t = row.tickers[0]
    peek = 100 * (prices[t].iloc[i + 1] / prices[t].iloc[i] - 1)  # the return of day T+1
    lines = row.prompt.splitlines()
    head, values = lines[1].split(":", 1)
    shifted = [*values.split()[1:], f"{peek:+.2f}"]
    lines[1] = f"{head}: " + " ".join(shifted)
    states.loc[victim, "prompt"] = "\n".join(lines)
    proc, out = _audit(base_run, tmp_path, states=states)
    assert proc.returncode == 2 and not out.exists()
    assert f"state {row.state_id}" in proc.stderr and "ending at the decision date" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_train_outcome_inside_the_test_window_fails(base_run, tmp_path):
    states = pd.read_parquet(base_run / "states.parquet")
    test = states[states.split == "test"]
    states.loc[test.date.idxmax(), "split"] = "train"  # a train state dated inside the test window
    proc, _ = _audit(base_run, tmp_path, states=states)
    assert proc.returncode == 2 and "leakage audit: train outcomes reach" in proc.stderr
    assert f"test window starts {test.date.min().date()}" in proc.stderr


@pytest.mark.parametrize("shift", [1, -1])
def test_a_wrong_outcome_fails(base_run, tmp_path, shift):
    outcomes = pd.read_parquet(base_run / "outcomes.parquet")
    outcomes.at[0, "forward_returns"] = list(np.asarray(outcomes.at[0, "forward_returns"]) + shift * 0.01)
    proc, _ = _audit(base_run, tmp_path, outcomes=outcomes)
    assert proc.returncode == 2 and "outcome is not the return" in proc.stderr
