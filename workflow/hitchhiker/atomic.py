"""Atomic writes: a killed job never leaves a half-file that Snakemake would take as done.

Each writer writes a temporary sibling and renames it into place (``os.replace`` is atomic
on POSIX within one file system). Standard library only: the replay buffer's writer opens
its file before pandas and pyarrow are imported (hitchhiker/stages/score.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def path(target: str | Path, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``target``; move it onto ``target`` only on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*"):  # left by a writer that was killed
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    written = tmp if is_dir else tmp / target.name
    if os.environ.get("HITCHHIKER_HOLD_WRITING") == target.name:  # fault injection (tests/test_crash.py):
        time.sleep(120)  # hold the temporary, so that a kill lands mid-write however fast the write
    try:
        yield written
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(written, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
