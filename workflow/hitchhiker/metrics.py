"""Statistics shared by evaluate, summarize and the environments: block bootstrap, paired
differences, portfolio returns, Sharpe and drawdown.

Decisions on the same date share a market, so uncertainty is estimated by a circular block
bootstrap over decision dates: each date a block of its own without overlap (stride >=
horizon); with a stride shorter than the horizon neighbouring decisions share days, and the
blocks are 2L dates long, L = ceil(horizon / stride) the overlap (blocks of L cut the
dependence at every edge). The bootstrap's 2.5th to 97.5th percentile interval from k blocks
is too narrow when k is small (benchmarks/coverage): without overlap it held a known truth
85-89% of the time on 8 dates and 91-95% on 16-64, and in blocks of the overlap 65-85% on
16-32 dates. So it is widened about the bootstrap's median by
- t(k - 1) / z, Student's t over the normal's 97.5% quantile (k block means, their spread
  estimated from themselves);
- sqrt(k / (k - 1)): the bootstrap's variance of a mean divides by k, not k - 1;
- with overlap, 1 / sqrt(captured): blocks of 2L keep only part of the variance of
  overlapping sums (decisions j dates apart share 1 - j / L of their days, as when daily
  returns are uncorrelated), 7/8 of it at L = 2, falling towards 5/6 (:func:`captured`);
1.06 in all at 32 dates without overlap, 1.01 at 256. The widening stops at the values the
statistic can take (a rate at 0 and 1) and never narrows the percentile interval. An
interval needs at least four blocks (four dates without overlap, 8L with it); with fewer
there is none (NaN; null in the JSON, "[too few dates]" in the tables), never a zero-width
or unbounded one: t(k - 1) / z is 1.6 at four blocks and 6.5 at two.

The portfolio the decisions induce: on each decision date, capital is split equally over
that date's decisions and held for the horizon; an invalid answer's share stays in cash.
When horizons overlap (stride < horizon), each date commits only stride / horizon of the
capital, so exposure never exceeds 1; its per-date return is then (stride / horizon) x the
mean reward of the date's decisions.
Sharpe is annualised with per_year / stride periods a year (per_year is 252 for daily data,
12 for monthly: frequency.py); the maximum drawdown is the largest fall of the compounded
equity curve from its running peak. Their intervals resample the per-date portfolio
returns in the same blocks and recompute the statistic (for drawdown,
a path statistic, the interval describes paths like this one, not a sampling error).

"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

BOOTSTRAP = 2000


def block_length(horizon: int, stride: int) -> int:
    """Dates per bootstrap block: 1 without overlap, twice ceil(horizon / stride) with it."""
    overlap = math.ceil(horizon / stride)
    return 1 if overlap == 1 else 2 * overlap


MIN_BLOCKS = 4  # fewer blocks give no interval


def too_few_dates(m: int, block: int) -> bool:
    """Whether m dates are too few for an interval: fewer than four blocks (see above)."""
    return m < MIN_BLOCKS * block


Z = 1.959964  # the standard normal's 97.5% quantile


def t975(df: float) -> float:
    """Student's t 97.5% quantile for ``df`` degrees of freedom: the Cornish-Fisher expansion
    in 1 / df (Abramowitz and Stegun 26.7.5), within 0.2% of the exact value from df = 3, the
    fewest used here. Written out because SciPy, which has the exact one, is not a dependency."""
    z = Z
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / df ** (i + 1) for i, term in enumerate(terms))


def captured(overlap: int) -> float:
    """The share of the long-run variance of a series of overlapping sums (autocorrelation
    1 - j / overlap at lag j) that the variance of its block means, in blocks of twice the
    overlap, holds: 1 + 2 x the sum of (1 - j / 2 overlap)(1 - j / overlap), over overlap."""
    block = 2 * overlap
    return (1 + 2 * sum((1 - j / block) * (1 - j / overlap) for j in range(1, overlap))) / overlap


def percentile_interval(stats, m: int, block: int, bounds=(-math.inf, math.inf)) -> tuple[float, float]:
    """95% interval from bootstrap statistics of a length-m series in blocks of ``block``
    dates (block_length's: 1, or twice the overlap): their 2.5th and 97.5th percentiles
    widened about their median for the few blocks and the cut dependence (see above), as far
    as ``bounds``, the values the statistic can take."""
    lo, mid, hi = np.percentile(stats, [2.5, 50, 97.5])
    k = m / block
    widen = t975(k - 1) / Z * math.sqrt(k / (k - 1) / captured(max(1, block // 2)))
    wide_lo, wide_hi = mid - (mid - lo) * widen, mid + (hi - mid) * widen
    # up to the bounds, never narrower than the percentiles: a mean of equal values (sum /
    # count) can lie an ulp outside [min, max], and so can its resamples' means
    return float(min(lo, max(wide_lo, bounds[0]))), float(max(hi, min(wide_hi, bounds[1])))


def interval_text(stat: dict | None, spec: str) -> str:
    """A mean and its 95% interval as text, "0.63 [0.55, 0.71]", each number formatted by
    ``spec``; "0.63 [too few dates]" where the interval is null; "" where there is no mean."""
    if not stat or stat.get("mean") is None or pd.isna(stat["mean"]):
        return ""
    lo, hi = stat["ci95"]
    interval = "[too few dates]" if lo is None or pd.isna(lo) else f"[{lo:{spec}}, {hi:{spec}}]"
    return f"{stat['mean']:{spec}} {interval}"


def block_resamples(m: int, block: int, seed: int, n: int) -> np.ndarray:
    """(n, m) positions of n circular block-bootstrap resamples of a length-m series."""
    block = min(block, m)
    starts = np.random.default_rng(seed).integers(0, m, size=(n, math.ceil(m / block)))
    return ((starts[:, :, None] + np.arange(block)) % m).reshape(n, -1)[:, :m]


def block_bootstrap_ci(values, dates, block: int, seed: int = 0, n: int = BOOTSTRAP) -> tuple[float, float, float]:
    """Mean of ``values`` and its 95% percentile interval, resampling blocks of dates."""
    frame = pd.DataFrame({"v": np.asarray(values, dtype=float), "d": np.asarray(dates)}).dropna()
    if frame.empty:
        return (math.nan, math.nan, math.nan)
    by_date = frame.groupby("d")["v"].agg(["sum", "count"]).sort_index()
    sums, counts = by_date["sum"].to_numpy(), by_date["count"].to_numpy()
    m = len(sums)
    mean = float(sums.sum() / counts.sum())
    if too_few_dates(m, block):
        return (mean, math.nan, math.nan)
    idx = block_resamples(m, block, seed, n)
    means = sums[idx].sum(1) / counts[idx].sum(1)
    return (mean, *percentile_interval(means, m, block, (frame["v"].min(), frame["v"].max())))


def block_bootstrap_median_ci(values, dates, block: int, seed: int = 0, n: int = 500) -> tuple[float, float]:
    """95% percentile interval of the median of ``values``, resampling blocks of dates as above."""
    frame = pd.DataFrame({"v": np.asarray(values, dtype=float), "d": np.asarray(dates)}).dropna()
    if frame.empty:
        return (math.nan, math.nan)
    groups = [g.to_numpy() for _, g in frame.groupby("d")["v"]]
    m = len(groups)
    if too_few_dates(m, block):
        return (math.nan, math.nan)
    idx = block_resamples(m, block, seed, n)
    medians = [np.median(np.concatenate([groups[j] for j in row])) for row in idx]
    return percentile_interval(medians, m, block, (frame["v"].min(), frame["v"].max()))


def held(frame: pd.DataFrame) -> pd.Series:
    """Each decision's return as the portfolio holds it: its reward, but an invalid answer
    made no decision, so its capital stays in cash (0), not at the invalid_penalty, which is
    a training signal (mean_reward keeps it; the Sharpe ratio, drawdown and equity curves do
    not count it as money lost)."""
    return frame["reward"].where(frame["valid"].astype(bool), 0.0) if "valid" in frame else frame["reward"]


def portfolio_returns(rewards, dates, horizon: int, stride: int) -> pd.Series:
    """Per-date return of the portfolio the decisions induce (see the module docstring)."""
    per_date = pd.Series(np.asarray(rewards, dtype=float), index=pd.Index(dates)).groupby(level=0).mean()
    return per_date.sort_index() * min(1.0, stride / horizon)


def sharpe(returns, stride: int, per_year: int = 252) -> float:
    r = np.asarray(returns, dtype=float)
    # a constant series has no risk to scale by (its float std is ~1e-17, not 0)
    if len(r) < 2 or r.std(ddof=1) <= 1e-12 * max(1.0, abs(r.mean())):
        return math.nan
    return float(r.mean() / r.std(ddof=1) * math.sqrt(per_year / stride))


def max_drawdown(returns) -> float:
    """Largest fall from a running peak of the compounded equity curve, as a fraction (>= 0)."""
    equity = np.cumprod(1.0 + np.asarray(returns, dtype=float))
    peak = np.maximum.accumulate(np.concatenate([[1.0], equity]))[1:]
    return float(np.max(1.0 - equity / peak)) if len(equity) else math.nan


def decision_stats(
    frame: pd.DataFrame, horizon: int, stride: int, seed: int = 0, per_year: int = 252, positions: bool = True
) -> dict:
    """Headline numbers of one policy's (or baseline's) decisions, each with a 95% interval.

    ``frame`` has one row per decision: date, reward, and optionally valid and correct. With
    ``positions`` (the environment's: each reward is a return on the capital it held), the
    Sharpe ratio and maximum drawdown of the portfolio the decisions induce too.
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
    out["median_reward"] = {
        "median": float(frame["reward"].median()),
        "ci95": list(block_bootstrap_median_ci(frame["reward"], frame["date"], block, seed)),
    }
    if not positions:
        return out
    port = portfolio_returns(held(frame), frame["date"], horizon, stride)
    for name, fn, bounds in (
        ("sharpe", lambda r: sharpe(r, stride, per_year), (-math.inf, math.inf)),
        ("max_drawdown", max_drawdown, (0.0, 1.0)),
    ):
        ci = series_bootstrap_ci(port.to_numpy(), block, fn, seed, bounds=bounds)
        out[name] = {"mean": fn(port.to_numpy()), "ci95": list(ci)}
    return out


def series_bootstrap_ci(
    values, block: int, fn, seed: int = 0, n: int = BOOTSTRAP, bounds=(-math.inf, math.inf)
) -> tuple[float, float]:
    """95% interval of ``fn`` over circular block resamples of a time series (see
    :func:`percentile_interval`; ``bounds``: the values ``fn`` can take)."""
    v = np.asarray(values, dtype=float)
    if too_few_dates(len(v), block):
        return (math.nan, math.nan)
    m = len(v)
    idx = block_resamples(m, block, seed, n)
    stats = np.array([fn(v[i]) for i in idx])
    stats = stats[np.isfinite(stats)]
    if not len(stats):
        return (math.nan, math.nan)
    return percentile_interval(stats, m, block, bounds)


def paired_difference(a: pd.Series, b: pd.Series, dates: pd.Series, horizon: int, stride: int, seed: int = 0) -> dict:
    """Mean of a - b over the same decisions, with its block-bootstrap 95% interval and the
    number of decisions where both are defined."""
    diff = a.to_numpy(dtype=float) - b.to_numpy(dtype=float)
    mean, lo, hi = block_bootstrap_ci(diff, dates, block_length(horizon, stride), seed)
    return {"mean": mean, "ci95": [lo, hi], "n": int(np.isfinite(diff).sum())}
