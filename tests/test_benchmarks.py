"""The benchmark scripts run: each answers --help (its imports resolve), and three run at their
smallest: coverage at two simulated evaluations a cell, score at one size (with one size,
benchmarks/score, states and audit ended in ZeroDivisionError after measuring) and states at
two (the marginal rate and fixed cost, or, where start-up noise outweighs the extra work, a
plain "none measurable": CI's run of b2ed95d timed 376 states at 14.0 s and 752 at 12.1 s).
The marginal rate refuses a slope it cannot measure."""

import sys

import pytest

from conftest import ROOT, run

SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").iterdir() if p.is_file() and p.suffix != ".py")


def test_every_benchmark_answers_help():
    assert {"audit", "coverage", "e2e", "gpu", "rollout", "score", "states", "train"} <= set(SCRIPTS)
    for name in SCRIPTS:
        assert run(ROOT / "benchmarks" / name, "--help").stdout.startswith(f"usage: {name} "), name


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, last",
    [
        (["score", "--rollouts", "2000", "--repeats", "1"], ("marginal rate: needs two sizes",)),
        # the last shape's last row (horizon 5, stride 1: blocks of 10 dates, too few on 16, four on 40)
        (["coverage", "--reps", "2", "--dates", "16", "40"], ("      5      1    10     40    4.0 ",)),
        # two sizes a few seconds apart: the slope is there, or noise hid it and it says so
        (
            ["states", "--tickers", "20", "--days", "400", "--per-date", "1", "2"],
            ("fixed cost (start-up, prices", "marginal rate: none measurable ("),
        ),
    ],
)
def test_a_benchmark_runs_at_its_smallest(args, last):
    out = run(ROOT / "benchmarks" / args[0], *args[1:]).stdout
    assert out.strip().splitlines()[-1].startswith(last), out


def test_train_refuses_completions_that_leave_no_step_to_time():
    # one step of 16, the first left out as warm-up: ten minutes of stages, then nan everywhere
    proc = run(ROOT / "benchmarks" / "train", "--completions", "16", check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "--completions 16: give a multiple of 8 of at least 32 (two steps)"
    ), proc.stderr


@pytest.mark.parametrize(
    "rows, says",
    [
        ([(100, 2.0)], "marginal rate: needs two sizes"),
        ([(100, 2.0), (200, 3.0)], "marginal rate between the smallest and largest size: 100 rows/s"),
        ([(100, 2.0), (200, 2.0)], "marginal rate: none measurable (200 took 2.00 s, 100 took 2.00 s"),
        ([(100, 2.5), (200, 2.0)], "marginal rate: none measurable"),
    ],
)
def test_the_marginal_rate_needs_two_sizes_and_more_time_for_more_work(rows, says, capsys, monkeypatch):
    monkeypatch.syspath_prepend(ROOT / "benchmarks")
    from universe import print_marginal

    print_marginal(rows, "rows/s", fixed="start-up")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(says), out
    assert len(out) == (2 if "between" in says else 1), out  # the fixed cost only beside a rate


def test_a_timed_command_reports_its_own_peak_memory_not_the_benchmarks(monkeypatch):
    """A child's ru_maxrss counts the pages it shares with its parent until it execs: a
    command started by a benchmark holding its universe reported the benchmark's size."""
    import numpy as np

    monkeypatch.syspath_prepend(ROOT / "benchmarks")
    from universe import timed

    held = np.ones(50_000_000)  # 0.37 GB here, as a benchmark holds its generated universe
    _, small = timed([sys.executable, "-c", "pass"])
    _, large = timed([sys.executable, "-c", "import numpy as np; np.ones(40_000_000)"])  # 0.30 GB there
    assert held.all() and small < 0.05 and 0.30 < large < 0.36, (small, large)
