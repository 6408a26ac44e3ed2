"""A user's own data file (a weather record, a signal or news file), read with the one-line
errors a user needs: missing, a directory, empty, a spreadsheet, not UTF-8, or unreadable.
The price files have their own reader (market/prices.py), which also takes yfinance's
two header rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hitchhiker.cli import HitchhikerError

SPREADSHEETS = {".xlsx", ".xls", ".xlsm", ".ods"}


def read_table(path: str | Path, what: str, key: str) -> pd.DataFrame:
    """The table in ``path`` (Parquet by its suffix, else CSV); ``what`` names the file in a
    message ("weather file"), ``key`` the config key that gave the path."""
    p = Path(path)
    where = "" if p.is_absolute() else f" (relative to the working directory {Path.cwd()})"
    if p.is_dir():
        raise HitchhikerError(f"config key {key}: {path} is a directory: name a CSV or Parquet file in it")
    if not p.is_file():
        raise HitchhikerError(f"config key {key}: {path} does not exist{where}")
    if p.stat().st_size == 0:
        raise HitchhikerError(f"{what} {path} is empty")
    if p.suffix.lower() in SPREADSHEETS:
        raise HitchhikerError(f"{what} {path}: a spreadsheet is not read; save the sheet as CSV (UTF-8)")
    try:
        return pd.read_parquet(p) if p.suffix.lower() == ".parquet" else pd.read_csv(p)
    except UnicodeDecodeError as err:
        raise HitchhikerError(
            f"{what} {path}: not UTF-8 text (it holds byte {err.object[err.start]:#04x}); "
            "save it as UTF-8 (CSV UTF-8 in Excel)"
        ) from None
    except Exception as err:  # pandas raises many types for malformed files
        raise HitchhikerError(f"{what} {path}: cannot read ({str(err).splitlines()[0]})") from None
