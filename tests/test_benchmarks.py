"""The benchmark scripts run: each answers --help (its imports resolve), and the two whose
figures issue 21's targets name run at their smallest, one size each (with one size,
benchmarks/score, states and audit ended in ZeroDivisionError after measuring)."""

import pytest

from conftest import ROOT, run

SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").iterdir() if p.is_file() and p.suffix != ".py")


def test_every_benchmark_answers_help():
    assert {"audit", "e2e", "gpu", "rollout", "score", "states", "train"} <= set(SCRIPTS)
    for name in SCRIPTS:
        assert run(ROOT / "benchmarks" / name, "--help").stdout.startswith(f"usage: {name} "), name


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, last",
    [
        (["score", "--rollouts", "2000", "--repeats", "1"], "marginal rate: needs two sizes"),
        (["states", "--tickers", "20", "--days", "400", "--per-date", "1", "2"], "fixed cost (start-up, prices"),
    ],
)
def test_a_benchmark_runs_at_its_smallest(args, last):
    out = run(ROOT / "benchmarks" / args[0], *args[1:]).stdout
    assert out.strip().splitlines()[-1].startswith(last), out
