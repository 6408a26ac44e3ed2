"""What every stage command shares: one-line errors instead of tracebacks."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path


class HitchhikerError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


def _console():
    """The terminal Snakemake runs in, where a job's output goes to its log: the rules' shell
    prefix (rules/common.smk) keeps it open as a file descriptor named by HITCHHIKER_CONSOLE.
    None when a stage runs on its own (its stdout is then the terminal already)."""
    fd = os.environ.get("HITCHHIKER_CONSOLE")
    if not fd:
        return None
    try:
        return os.fdopen(int(fd), "w", buffering=1, closefd=False)
    except (OSError, ValueError):  # not open in this process (a stage started by hand)
        return None


def console(line: str) -> None:
    """A line for the user's console as well as the job's log: what a run does that its
    config does not say (a request capped, a split cut to the data)."""
    # on a line of its own in the job's log, where a progress bar may have drawn without one
    bars = getattr(sys.modules.get("tqdm"), "tqdm", None)
    print("\n" * bool(getattr(bars, "_instances", None)) + line, flush=True)
    term = _console()
    if term is not None:
        term.write(f"{line}\n")


class Progress:
    """Halfway through a long loop (rollout's and evaluate's batches, grpo_train's steps), a
    line on the console, with the seconds so far: the job's log has tqdm's bar, and the
    console would say nothing for minutes. One line, not a bar: the console is shared by
    every job that runs at once."""

    def __init__(self, total: int, unit: str):
        self.total, self.unit, self.started, self.said = total, unit, time.monotonic(), False
        self.term = _console() if os.environ.get("RANK", "0") == "0" else None
        self.beside = os.environ.get("HITCHHIKER_CORES_AFTER")  # None once looked at
        self.update(0)

    def update(self, done: int) -> None:
        if self.beside and Path(self.beside).exists():
            self._take_the_cores(done)
        if self.term is None or self.said or not 2 * done >= self.total > done:
            return
        self.said = True
        seconds = time.monotonic() - self.started
        self.term.write(f"hitchhiker: {_job_name(None)}: {done} of {self.total} {self.unit} in {seconds:.0f} s\n")

    def _take_the_cores(self, done: int) -> None:
        """The job Snakemake ran this one beside (the previous round's evaluate, whose last
        output HITCHHIKER_CORES_AFTER names) is done, and nothing else of the run starts
        before this one ends: torch takes the run's cores (HITCHHIKER_RUN_CORES, at most this
        process's), where Snakemake gave the job one (rules/common.smk, Threads). Not in one
        of several training processes, which share the job's threads."""
        self.beside = None
        torch = sys.modules.get("torch")
        cores = min(int(os.environ.get("HITCHHIKER_RUN_CORES") or 1), len(os.sched_getaffinity(0)))
        if torch is None or int(os.environ.get("WORLD_SIZE", "1")) > 1 or torch.get_num_threads() >= cores:
            return
        # torch's own function: vLLM's CPU worker replaces torch.set_num_threads with a no-op
        # once it has started, and its engine, in this process, runs on torch's threads
        torch._C.set_num_threads(cores)
        job, so_far = _job_name(None), f"{done} of {self.total} {self.unit}"
        console(f"{job}: the job beside it is done: {cores} CPU threads after {so_far}")


def _job_name(argv: list[str] | None) -> str:
    """This job for the console, e.g. "rollout round 2": the stage module and its --round."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name.rsplit(".", 1)[-1] if spec else Path(sys.argv[0]).stem
    args = sys.argv[1:] if argv is None else argv
    if "--round" in args[:-1]:
        return f"{name} round {args[args.index('--round') + 1]}"
    return name


def run(main: Callable[[list[str] | None], None], argv: list[str] | None = None, announce: bool = True) -> None:
    """Run a stage's main; turn user errors into one line on stderr and exit 2. Under
    Snakemake, the console gets a line as the job starts and one as it ends, with its time
    (from the first worker of a distributed one; not from a launcher that becomes the stage)."""
    first_worker = os.environ.get("RANK", "0") == "0"
    term = _console() if announce and first_worker else None
    started, name = time.monotonic(), _job_name(argv)
    if term is not None:
        term.write(f"hitchhiker: {name} ...\n")
    try:
        main(argv)
    except HitchhikerError as err:
        print(f"hitchhiker: error: {err}", file=sys.stderr)
        sys.exit(2)
    if term is not None:
        term.write(f"hitchhiker: {name} done in {time.monotonic() - started:.0f} s\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        # argparse prints the whole usage block first; one line reads better in a job log
        self.exit(2, f"hitchhiker: error: {self.prog}: {message} (see --help)\n")


def parser(module_doc: str | None) -> argparse.ArgumentParser:
    """An argparse parser whose description is the stage module's docstring."""
    return _Parser(description=module_doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        required=True,
        help="config.yaml, or an inline JSON object with the sections this stage reads "
        "(that is how Snakemake calls it, so that a change in another section reruns nothing here)",
    )


def device_note() -> str:
    """For a torch stage's last line: the peak GPU memory of this process if it used CUDA,
    else the CPU threads torch ran on (Snakemake sets them from the rule's threads)."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return f", {torch.get_num_threads()} CPU thread(s)"
    return f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"
