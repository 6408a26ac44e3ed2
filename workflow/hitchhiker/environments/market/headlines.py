"""The headline table of market.data.news: one line per headline (date, ticker, headline), read by
build_states (prompts show them) and by the audit (which re-derives each prompt)."""

from __future__ import annotations

import pandas as pd

from hitchhiker.cli import HitchhikerError
from hitchhiker.environments import files


def read(path: str) -> pd.DataFrame:
    """The headline table (date, ticker, headline), one line per headline."""
    raw = files.read_table(path, "news file", "market.data.news")
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
