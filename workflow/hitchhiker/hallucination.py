"""What an answer claims that its state does not support.

Two checks on every completion (the action and its rationale):

unsupported claim
    Every number followed by "%" is a claimed return. It is supported when it lies within
    max(0.05, 5% of the value) percentage points of a return the prompt shows or implies
    for one of its tickers: a shown daily return, or the compounded return over the last j
    shown days (j = 2 .. history_days). A claim written without a sign ("fell 2.1%") is
    compared with the absolute values. An answer with any unsupported claim counts once.
unknown ticker
    A word of 2 to 5 capital letters (dots and dashes allowed inside, e.g. BRK.B) that is
    not one of the state's tickers and not a common abbreviation (COMMON below). An answer
    naming any such word counts once.

Invalid answers are checked too: a hallucinated number is one whatever the format. These
rates are 0 for text with no percentages and no capitalised words; they measure what the
model says about the data, not whether its decision was right.
"""

from __future__ import annotations

import re

import numpy as np

from hitchhiker.environments import market

_PERCENT = re.compile(r"(?<![\w.])([+-]?)(\d+(?:\.\d+)?)\s*%")
_TICKER = re.compile(r"(?<![\w.^=-])([A-Z][A-Z.\-]{0,3}[A-Z])(?![\w.^=-]*[a-z0-9])")
COMMON = frozenset(
    [
        "AI",
        "CEO",
        "CFO",
        "EPS",
        "ETF",
        "GDP",
        "IPO",
        "USD",
        "US",
        "USA",
        "EU",
        "UK",
        "FX",
        "PE",
        "ROE",
        "ROI",
        "YOY",
        "QOQ",
        "ATH",
        "MA",
        "RSI",
        "MACD",
        "CPI",
        "FED",
        "SEC",
        "IMO",
        "OK",
        "NO",
        "YES",
    ]
)


def supported_returns(prompt: str) -> np.ndarray:
    """Returns (in percent) a prompt shows or implies: daily and trailing compounded."""
    values = []
    for daily in market.shown_returns(prompt):
        growth = np.cumprod(1 + daily[::-1] / 100)  # trailing 1, 2, ... days, newest first
        values.extend(daily)
        values.extend(100 * (growth[1:] - 1))
    return np.asarray(values, dtype=float)


def check(completion: str, prompt: str, tickers) -> tuple[int, int, bool]:
    """(claims, unsupported claims, names an unknown ticker) of one completion."""
    text = completion or ""
    claims = _PERCENT.findall(text)
    unsupported = 0
    if claims:
        shown = supported_returns(prompt)
        for sign, number in claims:
            value = float(number) * (-1 if sign == "-" else 1)
            ref = shown if sign else np.abs(shown)
            tol = np.maximum(0.05, 0.05 * np.abs(ref))
            unsupported += not np.any(np.abs(ref - value) <= tol)
    names = set(tickers)
    unknown = any(w not in names and w not in COMMON for w in _TICKER.findall(text))
    return len(claims), unsupported, unknown
