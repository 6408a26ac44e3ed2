"""Which machine a benchmark ran on: this machine type comes as different CPUs (an Intel Xeon
with AMX, an AMD EPYC without it; README, Performance), so every figure says which."""

import os
from pathlib import Path


def cpu() -> str:
    """This machine's CPU model and the cores this process may use."""
    lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")
    return f"{model}, {len(os.sched_getaffinity(0))} cores"
