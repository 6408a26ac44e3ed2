"""What every stage command shares: one-line errors instead of tracebacks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


class HitchhikerError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


def run(main: Callable[[list[str] | None], None], argv: list[str] | None = None) -> None:
    """Run a stage's main; turn user errors into one line on stderr and exit 2."""
    try:
        main(argv)
    except HitchhikerError as err:
        print(f"hitchhiker: error: {err}", file=sys.stderr)
        sys.exit(2)


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
