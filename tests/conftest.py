"""Shared helpers: a tiny config and a way to run the real stage commands."""

from __future__ import annotations

import contextlib
import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "run": "tiny",
    "seed": 0,
    "rounds": 1,
    "market": {
        "data": {"source": "sample", "tickers": ["AAPL", "MSFT", "KO"]},
        "states": {"formats": ["pairwise", "elementwise"]},
    },
    "states": {
        "horizon": 5,
        "window": 5,
        "stride": 10,
        "train": {"start": "2016-01-01", "end": "2018-12-31", "max_states": 24},
        "test": {"start": "2019-03-01", "end": "2019-12-31", "max_states": 12},
    },
    "model": {"name_or_path": "tiny", "tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2}},
    "rollout": {"samples_per_state": 4, "states_per_round": 8, "max_new_tokens": 6, "batch_size": 8},
    "train": {
        "per_device_batch_size": 8,
        "epochs": 1,
        "learning_rate": 0.01,
        "lora": {"enabled": True, "r": 4, "alpha": 8},
    },
    "evaluate": {"max_states": 6, "samples_per_state": 2},
}


# Longest first. pytest-xdist (pyproject's addopts: -n 2, loadscope, no reordering by module
# size) hands each worker one module, then one more to a worker with at most two tests
# pending, and more only as its tests finish. So: the signal-learning run (2 tests) on the
# first worker, Slurm (2) on the second, then a short module (config) as the first worker's
# second, so that nothing long queues behind the learning run; the second worker takes vLLM
# at once and the rest as it goes. In xdist's own order (most tests first) the learning run
# started ten minutes in and finished alone at the end.
LONGEST_FIRST = [
    "test_learning", "test_slurm", "test_config", "test_vllm", "test_pipeline", "test_sequential", "test_crash",
    "test_objectives", "test_grpo_train", "test_deepspeed",
]  # fmt: skip


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.stem
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a module, and of the other modules, stays


def devices() -> list[str]:
    """The devices device-parametrized tests run on: the CPU, and CUDA where a GPU is."""
    import torch  # here, not at the top: most tests never need it

    return ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@contextlib.contextmanager
def openings():
    """The lengths of the common openings hitchhiker.training.shared_prompt.opening computed
    once in the block (0 where it computed none), in a list."""
    from hitchhiker.training import shared_prompt

    seen, inner = [], shared_prompt.opening

    def counted(*args):
        k, opened = inner(*args)
        seen.append(k if opened is not None else 0)
        return k, opened

    shared_prompt.opening = counted
    try:
        yield seen
    finally:
        shared_prompt.opening = inner


def tiny_config(**overrides) -> dict:
    """The tiny config with nested overrides: tiny_config(rollout={"samples_per_state": 2});
    the market's, one level deeper: tiny_config(market={"data": {"tickers": ["AAPL", "KO"]}})."""
    cfg = copy.deepcopy(TINY)
    for key, value in overrides.items():
        if key == "market" and isinstance(value, dict):
            value = {part: {**cfg["market"].get(part, {}), **given} for part, given in value.items()}
            cfg[key] = {**cfg["market"], **value}
        elif isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    from hitchhiker import environments  # here: conftest is read before the tests import hitchhiker

    name = cfg.get("environment", "market")
    if name in environments.ENVIRONMENTS and environments.get(name).config_key != "market":
        cfg.pop("market")  # another environment's run reads no market section
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def run(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command as a user would; return the completed process (text output)."""
    args = [str(a) for a in args]
    own = Path(sys.executable).parent / args[0]  # the test interpreter's own snakemake, ruff, ...
    if "/" not in args[0] and own.is_file():  # even when its virtualenv is not activated
        args[0] = str(own)
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def stage(name: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    """A stage's command (hitchhiker.stages.<name>), or grpo_train's launcher (launch)."""
    module = "hitchhiker.launch" if name == "launch" else f"hitchhiker.stages.{name}"
    return run(sys.executable, "-m", module, *args, check=check)


def rollout_round1(cfg: Path, base: Path, out: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Roll out round 1 of the base run's states with its base policy."""
    return stage("rollout", "--config", cfg, "--round", "1", "--states", base / "states.parquet",
                 "--outcomes", base / "outcomes.parquet", "--policy", base / "policy" / "round_0",
                 "--out", out, "--prompts", prompts_of(out), check=check)  # fmt: skip


def job_counts(output: str) -> dict[str, int]:
    """Snakemake's "Job stats" table in ``output`` (a dry run's stdout, a run's stderr) as
    {rule: jobs}, less the total; empty when there is nothing to do."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1].split("\ntotal", 1)[0]
    rows = [line.split() for line in table.splitlines()]
    return {words[0]: int(words[1]) for words in rows if len(words) == 2 and words[1].isdigit()}


def prompts_of(rollouts: Path) -> Path:
    """Where rollout_round1 writes the prompt token ids next to ``rollouts``."""
    return rollouts.with_suffix(".prompts.parquet")


@pytest.fixture(scope="session")
def base_run(tmp_path_factory):
    """fetch_prices -> base_model -> build_states on the tiny config, shared by tests."""
    d = tmp_path_factory.mktemp("base")
    cfg = write_config(d / "config.yaml", tiny_config())
    stage("fetch_prices", "--config", cfg, "--out", d / "prices.parquet")
    stage("base_model", "--config", cfg, "--out", d / "policy" / "round_0")
    stage(
        "build_states",
        "--config",
        cfg,
        "--data",
        d / "prices.parquet",
        "--policy",
        d / "policy" / "round_0",
        "--states",
        d / "states.parquet",
        "--outcomes",
        d / "outcomes.parquet",
    )
    return d


@pytest.fixture(scope="session")
def tok(base_run):
    """The tiny base policy's tokenizer (the shared-prompt trainers' tests)."""
    from hitchhiker import policy

    return policy.load_tokenizer(
        str(base_run / "policy" / "round_0"), {"name_or_path": "tiny", "trust_remote_code": False}
    )
