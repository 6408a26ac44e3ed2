"""The artifacts' contracts (the columns each must hold) and their readers and writers.

Every writer is atomic (hitchhiker/atomic.py): a killed job never leaves a half-file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# Columns each artifact must hold for a stage to read it, whatever the environment (the
from hitchhiker import atomic

# full schemas are in README.md; an environment adds its own, e.g. the market's tickers)
STATES = ["state_id", "split", "format", "date", "horizon", "prompt"]
OUTCOMES = ["state_id", "split", "format", "outcome_date"]
ROLLOUTS = [
    "state_id",
    "round",
    "sample_idx",
    "temperature",
    "completion_ids",
    "logprobs",
    "model_mask",
    "completion",
    "answers",
]
PROMPTS = ["state_id", "round", "prompt_ids"]
PREDICTIONS = ["round", "mode", "state_id", "date", "reward"]


def read_table(path: str | Path, columns: list[str] | None = None, only: list[str] | None = None) -> pa.Table:
    """Read an artifact as Arrow (``only`` those columns, if given); it must hold ``columns``;
    any problem is a one-line error naming it."""
    from hitchhiker.cli import HitchhikerError

    path = Path(path)
    if not path.is_file():
        raise HitchhikerError(f"input file {path} does not exist")
    try:
        with pq.ParquetFile(path) as file:
            missing = [c for c in columns or [] if c not in file.schema_arrow.names]
            if missing:
                raise HitchhikerError(
                    f"input file {path} lacks column(s) {', '.join(missing)}: is it the right artifact?"
                )
            return file.read(only)
    except (OSError, ValueError, pa.ArrowException) as err:
        raise HitchhikerError(
            f"input file {path} is not a readable Parquet file ({str(err).splitlines()[0]})"
        ) from None


def read_parquet(path: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """:func:`read_table` as pandas."""
    return read_table(path, columns).to_pandas()


def read_json(path: str | Path, keys: list[str]) -> dict:
    """Read a JSON artifact (an object holding ``keys``); any problem is a one-line error naming it."""
    from hitchhiker.cli import HitchhikerError

    path = Path(path)
    if not path.is_file():
        raise HitchhikerError(f"input file {path} does not exist")
    try:
        obj = json.loads(path.read_bytes())
    except ValueError as err:  # not JSON, or not text at all (UnicodeDecodeError)
        raise HitchhikerError(f"input file {path} is not readable JSON ({err})") from None
    missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
    if missing:
        raise HitchhikerError(f"input file {path} lacks key(s) {', '.join(missing)}: is it the right artifact?")
    return obj


def write_parquet(df: pd.DataFrame | pa.Table, path: str | Path) -> None:
    table = df if isinstance(df, pa.Table) else pa.Table.from_pandas(df, preserve_index=False)
    # no pandas metadata: every reader gets plain NumPy-backed columns, whatever dtypes wrote them
    table = table.replace_schema_metadata(None)
    with atomic.path(path) as tmp:
        pq.write_table(table, tmp)


def _finite(obj):
    """NaN and infinities as null: json.dumps writes NaN, which is not JSON (JSON.parse refuses it)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def write_json(obj, path: str | Path) -> None:
    text = json.dumps(_finite(obj), indent=2, sort_keys=True, default=str, allow_nan=False)
    with atomic.path(path) as tmp:
        tmp.write_text(text + "\n")


def write_csv(df: pd.DataFrame, path: str | Path) -> None:
    with atomic.path(path) as tmp:
        df.to_csv(tmp, index=False)
