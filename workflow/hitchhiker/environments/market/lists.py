"""List columns to and from NumPy arrays: the one place the environments convert them.

States and outcomes keep per-ticker values as list columns (Arrow ``list<double>`` and
nested lists, pandas ``ArrowDtype``), which Parquet and DuckDB store as they are; the
arithmetic wants arrays. Every conversion goes through Arrow's offsets and flattening (no
Python loop per row) except :func:`nested`, which also reads what a column holds once
pandas has turned it into lists of NumPy arrays.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def _arrow(column) -> pa.Array:
    """A list column (Arrow-backed or of Python lists or arrays) as an Arrow array."""
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column
    try:  # a column of 1-d arrays (what pandas makes of a list column), nested or not, converts as it is
        return pa.array(column)
    except pa.ArrowInvalid:  # rows of 2-d arrays ("Only 1D arrays accepted"): as lists of their rows
        return pa.array(column.map(list) if isinstance(column, pd.Series) else [list(x) for x in column])


def from_array(values: np.ndarray, kind: pa.DataType | None = None) -> pd.Series:
    """An array (rows, a, b, ...) as a column of nested lists, one per row (of doubles unless ``kind``)."""
    arr = pa.array(values.reshape(-1), kind or pa.float64())
    for axis in range(values.ndim - 1, 0, -1):  # offsets, not fixed sizes: an axis may be empty (one turn)
        count = int(np.prod(values.shape[:axis]))
        arr = pa.ListArray.from_arrays(pa.array(np.arange(count + 1, dtype=np.int32) * values.shape[axis]), arr)
    return pd.Series(arr, dtype=pd.ArrowDtype(arr.type))


def ragged(values: np.ndarray, width: np.ndarray) -> pd.Series:
    """(rows, k, periods) values as a list<list<double>> column, row i keeping its last width[i] periods."""
    s, k, n = values.shape
    keep = np.broadcast_to(np.arange(n) >= (n - width)[:, None, None], values.shape)
    inner = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(np.repeat(width, k))]).astype(np.int32)), pa.array(values[keep])
    )
    arr = pa.ListArray.from_arrays(pa.array(np.arange(s + 1, dtype=np.int32) * k), inner)
    return pd.Series(arr, dtype=pd.ArrowDtype(arr.type))


def lengths(column) -> np.ndarray:
    """Each row's list length."""
    return pc.list_value_length(_arrow(column)).to_numpy(zero_copy_only=False)


def padded(column, width: int | None = None, fill: float = np.nan) -> np.ndarray:
    """A column of number lists (or a list of 1-d arrays) as (rows, width) floats, padded
    with ``fill``; ``width`` defaults to the longest list (at least 1)."""
    arr = _arrow(column)
    k = lengths(arr)
    if width is None:
        width = max(1, int(k.max(initial=0)))
    out = np.full((len(arr), width), fill)
    out[np.arange(width) < k[:, None]] = pc.list_flatten(arr).to_numpy(zero_copy_only=False)
    return out


def flat(column, depth: int) -> np.ndarray:
    """The values of a list column (``depth`` levels of lists) as one flat float array."""
    arr = _arrow(column)
    for _ in range(depth):
        arr = pc.list_flatten(arr)
    return arr.to_numpy(zero_copy_only=False).astype(float)


def plain(x):
    """Nested lists of floats from what a list column holds (lists, NumPy object arrays of arrays)."""
    if isinstance(x, np.ndarray) and x.dtype != object:
        return x.tolist()
    if isinstance(x, list | tuple | np.ndarray):
        return [plain(v) for v in x]
    return x


def nested(column, shape: tuple[int, ...]) -> np.ndarray:
    """A nested list column of equal-length lists as an array (rows, *shape); one entry of
    ``shape`` may be -1."""
    values = [plain(x) for x in column]
    return np.asarray(values, dtype=float).reshape(len(values), *shape)


def pylist(values) -> list:
    """A column as a Python list: one conversion, where iterating an Arrow-backed column
    builds a scalar per element."""
    return values.tolist() if hasattr(values, "tolist") else list(values)
