"""The price table's frequency: one row is a trading day, a week, a month, a quarter or a year.

states.window, horizon, stride and embargo count rows of the price table, so what they mean
depends on it: the prompt's words ("Monthly returns", "over the next 3 months"), the audit's
report and the check that a horizon is at most a year all read it. It is detected from the
median gap between consecutive dates: 1-4 calendar days between the rows of a table of
trading days, 28-31 between those of a monthly one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker.cli import HitchhikerError

# name: (median calendar days between rows, the returns' adjective, one period, periods a year)
FREQUENCIES = {
    "daily": ((1, 4), "Daily", "trading day", 252),
    "weekly": ((5, 9), "Weekly", "week", 52),
    "monthly": ((27, 32), "Monthly", "month", 12),
    "quarterly": ((85, 95), "Quarterly", "quarter", 4),
    "annual": ((360, 370), "Annual", "year", 1),
}


def detect(dates) -> str:
    """The frequency of a column of dates (repeats allowed, any order)."""
    days = np.unique(pd.DatetimeIndex(dates).values.astype("datetime64[D]"))
    return "daily" if len(days) < 2 else _classify(float(np.median(np.diff(days).astype(float))))


def of_outcomes(dates, outcome_dates, horizon: int) -> str:
    """The frequency of the prices behind states: each outcome lies ``horizon`` rows after its date."""
    span = (pd.DatetimeIndex(outcome_dates) - pd.DatetimeIndex(dates)).days.to_numpy()
    return _classify(float(np.median(span)) / horizon)


def per_year(freq: str) -> int:
    """Periods a year, to annualise a Sharpe ratio (252 trading days, 12 months, ...)."""
    return FREQUENCIES[freq][3]


def _classify(gap: float) -> str:
    for name, ((lo, hi), *_) in FREQUENCIES.items():
        if lo <= gap <= hi:
            return name
    raise HitchhikerError(
        f"the price table's dates are {gap:g} calendar days apart (the median): not daily, weekly, monthly, "
        "quarterly or annual data"
    )


def periods(freq: str, n: int) -> str:
    """``n`` periods in words: "5 trading days", "1 month"."""
    one = FREQUENCIES[freq][2]
    return f"{n} {one}" if n == 1 else f"{n} {one}s"


def check_horizon(freq: str, horizon: int) -> None:
    """Refuse a horizon longer than a year of the data's periods (a daily horizon left on monthly data)."""
    per_year = FREQUENCIES[freq][3]
    if horizon > per_year:
        raise HitchhikerError(
            f"config key states.horizon = {horizon}: {periods(freq, horizon)} with this {freq} price table, more "
            f"than a year (window, horizon, stride and embargo count its rows: {periods(freq, 2)[2:]} here)"
        )
