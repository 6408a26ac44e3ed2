"""Statistics shared by evaluate and summarize: block bootstrap, portfolio returns, Sharpe, drawdown.

Decisions on the same date share a market, and with a stride shorter than the horizon
their outcomes overlap in time, so uncertainty is estimated by a circular block bootstrap
over decision dates with blocks of ceil(horizon / stride) consecutive dates.

The portfolio the decisions induce: on each decision date, capital is split equally over
that date's decisions and held for the horizon. When horizons overlap (stride < horizon),
each date commits only stride / horizon of the capital, so exposure never exceeds 1; its
per-date return is then (stride / horizon) x the mean reward of the date's decisions.
Sharpe is annualised with 252 / stride periods a year; the maximum drawdown is the largest
fall of the compounded equity curve from its running peak.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

BOOTSTRAP = 2000


def block_length(horizon: int, stride: int) -> int:
    return max(1, math.ceil(horizon / stride))


def block_bootstrap_ci(values, dates, block: int, seed: int = 0, n: int = BOOTSTRAP) -> tuple[float, float, float]:
    """Mean of ``values`` and its 95% percentile interval, resampling blocks of dates."""
    frame = pd.DataFrame({"v": np.asarray(values, dtype=float), "d": np.asarray(dates)}).dropna()
    if frame.empty:
        return (math.nan, math.nan, math.nan)
    by_date = frame.groupby("d")["v"].agg(["sum", "count"]).sort_index()
    sums, counts = by_date["sum"].to_numpy(), by_date["count"].to_numpy()
    m = len(sums)
    block = min(block, m)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, m, size=(n, math.ceil(m / block)))
    idx = ((starts[:, :, None] + np.arange(block)) % m).reshape(n, -1)[:, :m]
    means = sums[idx].sum(1) / counts[idx].sum(1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(sums.sum() / counts.sum()), float(lo), float(hi)


def portfolio_returns(rewards, dates, horizon: int, stride: int) -> pd.Series:
    """Per-date return of the portfolio the decisions induce (see the module docstring)."""
    per_date = pd.Series(np.asarray(rewards, dtype=float), index=pd.Index(dates)).groupby(level=0).mean()
    return per_date.sort_index() * min(1.0, stride / horizon)


def sharpe(returns, stride: int) -> float:
    r = np.asarray(returns, dtype=float)
    # a constant series has no risk to scale by (its float std is ~1e-17, not 0)
    if len(r) < 2 or r.std(ddof=1) <= 1e-12 * max(1.0, abs(r.mean())):
        return math.nan
    return float(r.mean() / r.std(ddof=1) * math.sqrt(252 / stride))


def max_drawdown(returns) -> float:
    """Largest fall from a running peak of the compounded equity curve, as a fraction (>= 0)."""
    equity = np.cumprod(1.0 + np.asarray(returns, dtype=float))
    peak = np.maximum.accumulate(np.concatenate([[1.0], equity]))[1:]
    return float(np.max(1.0 - equity / peak)) if len(equity) else math.nan


def decision_stats(frame: pd.DataFrame, horizon: int, stride: int, seed: int = 0) -> dict:
    """Headline numbers of one policy's (or baseline's) decisions, each with a 95% interval.

    ``frame`` has one row per decision: date, reward, and optionally valid and correct.
    """
    block = block_length(horizon, stride)
    out: dict = {"n": len(frame), "decision_dates": int(frame["date"].nunique())}
    columns = {"mean_reward": frame["reward"], "hit_rate": (frame["reward"] > 0).astype(float)}
    if "valid" in frame:
        columns["valid_rate"] = frame["valid"].astype(float)
    if "correct" in frame:
        columns["accuracy"] = frame["correct"]
    for name, col in columns.items():
        mean, lo, hi = block_bootstrap_ci(col, frame["date"], block, seed)
        out[name] = {"mean": mean, "ci95": [lo, hi]}
    out["median_reward"] = float(frame["reward"].median())
    port = portfolio_returns(frame["reward"], frame["date"], horizon, stride)
    out["sharpe"] = sharpe(port, stride)
    out["max_drawdown"] = max_drawdown(port)
    return out


def paired_difference(a: pd.Series, b: pd.Series, dates: pd.Series, horizon: int, stride: int, seed: int = 0) -> dict:
    """Mean of a - b over the same decisions, with its block-bootstrap 95% interval."""
    mean, lo, hi = block_bootstrap_ci(a.to_numpy() - b.to_numpy(), dates, block_length(horizon, stride), seed)
    return {"mean": mean, "ci95": [lo, hi]}
