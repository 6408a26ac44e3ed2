"""The generated universe the scale benchmarks run on: geometric random walks, seeded."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def universe(n_tickers: int, n_days: int, seed: int = 0) -> tuple[pd.DataFrame, list[str]]:
    """Long (date, ticker, close) table of ``n_tickers`` over ``n_days`` business days."""
    rng = np.random.default_rng(seed)
    tickers = [f"T{i:03d}" for i in range(n_tickers)]
    dates = pd.bdate_range("1990-01-01", periods=n_days)
    closes = 50 * np.exp(np.cumsum(rng.normal(0.0002, 0.015, (n_days, n_tickers)), axis=0))
    long = pd.DataFrame(
        {"date": np.repeat(dates, n_tickers), "ticker": np.tile(tickers, n_days), "close": closes.ravel()}
    )
    return long, tickers


def states_config(tickers: list[str], dates, per_date: int) -> dict:
    """Pairwise states on every trading day: the first 80% train, the rest test."""
    cut = int(len(dates) * 0.8)
    day = lambda i: str(dates[i])[:10]  # noqa: E731
    return {
        "run": "bench",
        "market": {
            "data": {"source": "sample", "tickers": tickers},
            "states": {"formats": ["pairwise"], "per_date": per_date},
        },
        "states": {
            "horizon": 5,
            "window": 10,
            "stride": 1,
            "train": {"start": day(0), "end": day(cut), "max_states": None},
            "test": {"start": day(cut + 10), "end": day(len(dates) - 1), "max_states": None},
        },
    }


def tiny_policy(out: Path, tickers: list[str]) -> None:
    """The default tiny model and tokenizer, as a policy directory: the base_model stage's,
    its output shown only if it fails."""
    cfg = {"run": "bench", "market": {"data": {"tickers": tickers[:20]}}}
    timed([sys.executable, "-m", "hitchhiker.stages.base_model", "--config", json.dumps(cfg), "--out", str(out)])


# What timed runs a command under: a bare interpreter that starts it and prints its wall
# seconds, exit status and peak RSS (kB) last. The kernel's peak RSS of a child (ru_maxrss)
# counts the pages it shares with the process it was forked from until it execs, so a command
# started by the benchmark itself, which holds its universe, reported the benchmark's size:
# score at 100k rollouts 0.60 GB, for its own 0.49.
_SHIM = """import os, subprocess, sys, time
start = time.perf_counter()
_, status, usage = os.wait4(subprocess.Popen(sys.argv[1:]).pid, 0)
print(f"\\n{time.perf_counter() - start} {status} {usage.ru_maxrss}")
"""


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (GB) of one child process."""
    proc = subprocess.run([sys.executable, "-c", _SHIM, *cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _, last = proc.stdout.decode().rstrip("\n").rpartition("\n")
    if proc.returncode != 0 or last.split()[1] != "0":  # the shim's error, or the command's exit status
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout.decode() if proc.returncode else out}")
    wall, _, peak = last.split()
    return float(wall), int(peak) / 1024**2


def print_marginal(rows: list[tuple[int, float]], unit: str, per: float = 1.0, fixed: str | None = None) -> None:
    """From (size, wall s) rows: the marginal rate between the smallest and largest size and,
    with ``fixed`` (what the fixed cost is), the fixed cost by extrapolation to size 0. With one
    size, or when the largest took no longer than the smallest (noise beyond the work), there
    is no slope, and it says which."""
    (n0, w0), (n1, w1) = min(rows), max(rows)
    if n1 == n0:
        print("marginal rate: needs two sizes (give more than one)")
        return
    if w1 <= w0:
        print(f"marginal rate: none measurable ({n1:,} took {w1:.2f} s, {n0:,} took {w0:.2f} s: noise beyond the work)")
        return
    print(f"marginal rate between the smallest and largest size: {per * (n1 - n0) / (w1 - w0):,.0f} {unit}")
    if fixed:
        print(f"fixed cost ({fixed}) by extrapolation to size 0: {w0 - n0 * (w1 - w0) / (n1 - n0):.2f} s")
