"""The headline table of market.data.news: one line per headline (date, ticker, headline), read by
build_states (prompts show them) and by the audit (which re-derives each prompt)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hitchhiker.cli import HitchhikerError


def read(path: str) -> pd.DataFrame:
    """The headline table (date, ticker, headline), one line per headline."""
    p = Path(path)
    if not p.is_file():
        raise HitchhikerError(f"config key market.data.news: {path} does not exist")
    try:
        raw = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    except Exception as err:  # pandas raises many types for malformed files
        raise HitchhikerError(f"news file {path}: cannot read ({str(err).splitlines()[0]})") from None
    missing = {"date", "ticker", "headline"} - set(raw.columns)
    if missing:
        raise HitchhikerError(f"news file {path}: missing column {', '.join(sorted(missing))}")
    from hitchhiker.environments.market.prices import read_close_dates  # here: a data-step module

    return pd.DataFrame(
        {
            "date": read_close_dates(raw["date"], f"news file {path}", "headline"),
            "ticker": raw["ticker"].astype(str),
            "headline": raw["headline"].astype(str).str.replace(r"\s+", " ", regex=True).str.strip(),
        }
    )
