"""The market's decision metrics: rank information coefficient, Brier score and calibration.

Rank IC: Spearman's correlation between what an answer prefers and what happened. For a
pairwise or listwise answer, over its tickers: the weights (a ranking answer prefers by
rank); for elementwise answers, across each date's states: the position against the
realised return. Ties in preference (equal weights, a lone state on a date) give no IC.

Brier score: for pairwise and listwise answers, the mean over the state's tickers of
(weight - 1[that ticker returned the most])^2, the usual binary Brier of "A wins" for a
pair; for elementwise answers ((w + 1) / 2 - 1[return > 0])^2, reading the position w as a
probability of a rise. The calibration table bins these forecasts in fifths.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hitchhiker.metrics import paired_difference


def spearman(a, b) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    if len(ra) < 2 or np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def rank_ic(frame: pd.DataFrame) -> pd.Series:
    """One IC per (state, answer) for multi-ticker answers and one per date for elementwise
    ones (a position per state: the IC is across that date's states), indexed by (unit, date):
    the unit is the state_id, or "elementwise" for a date's cross-section. ``frame`` has
    state_id, date, format, valid, preference and forward_returns."""
    ok = frame[frame["valid"]]
    multi = ok[ok["format"] != "elementwise"]
    values = [spearman(p, r) for p, r in zip(multi["preference"], multi["forward_returns"], strict=True)]
    units, dates = list(multi["state_id"]), list(multi["date"])
    for date, part in ok[ok["format"] == "elementwise"].groupby("date"):
        values.append(spearman([p[0] for p in part["preference"]], [r[0] for r in part["forward_returns"]]))
        units.append("elementwise")
        dates.append(date)
    index = pd.MultiIndex.from_arrays([units, pd.DatetimeIndex(dates)], names=["unit", "date"])
    return pd.Series(values, index=index, dtype=float).dropna()


def paired_rank_ic(frame: pd.DataFrame, base: pd.DataFrame, horizon: int, stride: int, seed: int = 0) -> dict:
    """Rank IC of one policy's answers minus another's on the same states: a state's mean IC
    over its answers for multi-ticker formats, a date's cross-sectional IC for elementwise
    ones; paired over the units where both policies have an IC (``n`` counts them)."""
    cur, ref = (rank_ic(f).groupby(level=["unit", "date"]).mean() for f in (frame, base))
    cur, ref = cur.align(ref, join="inner")
    return paired_difference(cur, ref, cur.index.get_level_values("date"), horizon, stride, seed)


def forecasts(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(forecast, outcome, row) pairs of valid answers: a weight per ticker and whether that
    ticker returned the most, or an elementwise position as a probability of a rise."""
    f, o, row = [], [], []
    for i, (fmt, valid, w, r) in enumerate(
        zip(frame["format"], frame["valid"], frame["weights"], frame["forward_returns"], strict=True)
    ):
        if not valid:
            continue
        w, r = np.asarray(w, dtype=float), np.asarray(r, dtype=float)
        if fmt == "elementwise":
            f.append((w[0] + 1) / 2)
            o.append(float(r[0] > 0))
            row.append(i)
        else:
            f.extend(w)
            o.extend((r == r.max()).astype(float))
            row.extend([i] * len(w))
    return np.asarray(f), np.asarray(o), np.asarray(row, dtype=int)


def brier(frame: pd.DataFrame) -> pd.Series:
    """Brier score of each valid answer (see the module docstring), indexed by date."""
    f, o, row = forecasts(frame)
    per_row = pd.Series((f - o) ** 2).groupby(row).mean()
    return pd.Series(per_row.to_numpy(), index=frame["date"].to_numpy()[per_row.index.to_numpy(dtype=int)])


def calibration(frame: pd.DataFrame) -> list[dict]:
    """Forecasts binned in fifths: count, mean forecast, observed frequency."""
    f, o, _ = forecasts(frame)
    bins = np.minimum((f * 5).astype(int), 4)
    return [
        {
            "bin": [b / 5, (b + 1) / 5],
            "n": int((bins == b).sum()),
            "forecast": float(f[bins == b].mean()),
            "observed": float(o[bins == b].mean()),
        }
        for b in range(5)
        if (bins == b).any()
    ]
