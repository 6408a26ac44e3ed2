"""What an answer claims that its state does not support.

The environment knows exactly what it showed, so every completion (the action and its
rationale, valid or not) is checked against its prompt by six rules; figure, arithmetic and
day are the shared ones of environments/claims.py (the weather applies them too), the rest
the market's own. Each rule counts
claims; an answer with one or more counts once in its rate. The examples are SmolLM2-135M-
Instruct's own completions on the default run's states.

percent (unsupported claim)
    A number followed by "%" is a claimed return. It is supported when it lies within
    max(0.05, 5% of the value) percentage points of a return the prompt shows or implies
    for one of its tickers: a shown return, or the compounded return over the last j shown
    periods. A claim without a sign ("fell 2.1%") is compared with absolute values.
    SmolLM2: "A returns more than 10% over the next 5 trading days".
figure (a number presented as a shown one)
    A plain decimal number (no "%") is read as a figure from the prompt, the way SmolLM2
    recites them: "A: +0.25 +2.01 -0.90 +1.36" when A showed +0.07 -1.29 +1.30 -0.60. It is
    supported when, at the precision written, it equals a value the prompt shows (any
    section, any ticker) or a compounded return as above. Not checked: listwise weights
    ("A=0.5"), the result of a sum (arithmetic, below), and a number that ends the text
    (it may be cut off by max_new_tokens, "+1.0" of "+1.06").
arithmetic (wrong arithmetic)
    Two or more signed numbers followed by "= r" claim that they sum to r; wrong when the
    sum misses r by more than the rounding of the figures written. SmolLM2: "A: +0.13 +1.44
    = +0.25", "A: 1.84 -1.22 = 1.08".
label (a label bound to the wrong ticker)
    "A (JPM)" or "JPM (A)" where JPM is one of the state's tickers but not the one labelled
    A. SmolLM2 writes "A (KO): ..." in the prompt's own form; a ticker that is not in the
    state at all is an unknown ticker instead ("A (MISC)").
day (a claim about periods the prompt does not show)
    "last/past/previous/prior N days" (or the data's periods: weeks, months, ...) with N
    more than the periods shown; a weekday name; a calendar date (2021-03-04, March 4) the
    prompt does not show. The question's own "next N trading days" is not a claim.
unknown ticker
    A word of 2 to 5 capital letters (dots and dashes allowed inside, e.g. BRK.B) that is
    not one of the state's tickers, not a common abbreviation (COMMON below) and not a word
    of the prompt itself (a signal's name, a headline's "FDA"). Counted once per distinct word.

:func:`count` is their sum, what grounding.unsupported_claim_penalty charges per claim in
score; a percent claim or a checked figure that no rule faults is supported (counted, paid
nothing: a copied figure is no reason; what a reason argues is reasons.py's). These measure
what the model says about the data, not whether its decision was right: text with no
numbers, names or dates has none.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker import frequency
from hitchhiker.environments import claims
from hitchhiker.environments.market import answers, lists, prompts

# The shared rules' patterns are in environments/claims.py; these are the market's own,
# written the same way (a lookahead for the characters a match can start with).
_PERCENT = re.compile(r"(?=[+\-\d])(?<![\w.])([+-]?)(\d+(?:\.\d+)?)\s*%")
_TICKER = re.compile(r"(?=[A-Z])(?<![\w.^=-])([A-Z][A-Z.\-]{0,3}[A-Z])(?![\w.^=-]*[a-z0-9])")
_LABELLED = re.compile(
    r"(?=[A-Z])(?:\b([A-Z])\s?\(\s*([A-Za-z0-9.^=-]{1,16})\s*\)|\b([A-Z][A-Z0-9.^=-]{1,15})\s?\(\s*([A-Z])\s*\))"
)
_TRADING_DAYS = {"day": 1, "session": 1, "week": 252 / 52, "month": 21, "quarter": 63, "year": 252}

# Where each rule's pattern could match (claims.MAY: about two thirds of SmolLM2's
# completions, 4% of benchmarks/score's mix); tests/test_metrics.py checks that the counts
# equal those of the rules run on every text.
_MAY = {
    "percent": r"%",  # _PERCENT
    "figure": claims.MAY["figure"],
    "sum": claims.MAY["sum"],
    "label": rf"[A-Z0-9.^=\-][{claims.WS_CHARS}]?\(",  # _LABELLED
    "day": claims.MAY["day"],
    "ticker": r"(?:^|[^0-9A-Za-z_.^=\-])[A-Z][A-Z.\-]{0,3}[A-Z]",  # _TICKER
}


def may_claim(texts: pa.Array, pattern: str = "|".join(_MAY.values())) -> np.ndarray:
    """Which texts could hold a claim (a superset of those that do): of any rule, or of the
    rule whose ``_MAY`` pattern is given."""
    return claims.may_claim(texts, pattern)


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


class Claims(NamedTuple):
    """Claims of one completion: percent claims and figures made, and unsupported claims of
    each kind. A percent claim or a figure that is not unsupported is supported."""

    claims: int
    figures: int
    unsupported: int
    figure: int
    arithmetic: int
    label: int
    day: int
    unknown_ticker: int


KINDS = ("unsupported", "figure", "arithmetic", "label", "day", "unknown_ticker")
RATES = {  # each kind's rate (answers with at least one such claim) as metrics.json names it
    "unsupported": "unsupported_claim_rate",
    "figure": "unshown_figure_rate",
    "arithmetic": "wrong_arithmetic_rate",
    "label": "wrong_label_rate",
    "day": "unshown_day_rate",
    "unknown_ticker": "unknown_ticker_rate",
}


def with_totals(claims: pd.DataFrame) -> pd.DataFrame:
    """Claims (the columns of check, a row per answer) with unsupported_claims (every kind's,
    what the grounding penalty charges) and supported_claims (percent claims and figures
    that no rule faults, what the supported-claim bonus pays for)."""
    unsupported = claims[list(KINDS)].sum(axis=1)
    supported = claims["claims"] + claims["figures"] - claims["unsupported"] - claims["figure"]
    return claims.assign(unsupported_claims=unsupported, supported_claims=supported)


def indicators(frame: pd.DataFrame) -> pd.DataFrame:
    """Per answer, from its claim counts (the Claims columns of check): 1.0 where it has a
    claim of each kind (named as RATES), any_rate for any kind, unsupported_per_answer (the
    count); and what says whether a fall in them is only writing less: stating_figures_rate
    (1.0 where the answer states any percent or figure), supported_per_answer (those the
    prompt supports) and completion_chars (the text's length). Their means are the rates
    evaluate reports and summarize pairs."""
    totals = with_totals(frame)
    out = pd.DataFrame({RATES[kind]: (frame[kind] > 0).astype(float) for kind in KINDS}, index=frame.index)
    out.insert(0, "any_rate", (totals["unsupported_claims"] > 0).astype(float))
    out["unsupported_per_answer"] = totals["unsupported_claims"].astype(float)
    out["stating_figures_rate"] = (frame["claims"] + frame["figures"] > 0).astype(float)
    out["supported_per_answer"] = totals["supported_claims"].astype(float)
    out["completion_chars"] = frame["completion"].fillna("").str.len().astype(float)
    return out


def supported_returns(sections: dict[str, dict[str, np.ndarray]]) -> np.ndarray:
    """Returns (in percent) a prompt (read by prompts.shown) shows or implies: each period's
    and trailing compounded."""
    values = []
    for daily in prompts.section_returns(sections):
        growth = np.cumprod(1 + daily[::-1] / 100)  # trailing 1, 2, ... periods, newest first
        values.extend(daily)
        values.extend(100 * (growth[1:] - 1))
    return np.asarray(values, dtype=float)


class _Reference(NamedTuple):
    implied: np.ndarray  # returns shown or compounded (supported_returns)
    values: np.ndarray  # every value shown, any section, and the implied returns
    shown_days: float  # the periods shown, in trading days
    dates: str  # a date said is supported where the prompt's text holds it (a headline's)
    weekdays: frozenset = frozenset()  # a prompt shows no weekday


@functools.lru_cache(maxsize=4096)
def _reference(prompt: str) -> _Reference:
    """What a prompt shows, parsed once: a state's B samples (and its rounds) share the prompt."""
    sections = prompts.shown(prompt)
    implied = supported_returns(sections)
    shown = np.asarray([v for section in sections.values() for vals in section.values() for v in vals], dtype=float)
    periods = max((len(v) for key, sec in sections.items() if key != "signals" for v in sec.values()), default=0)
    freq = next((f for f in frequency.FREQUENCIES if prompts.headers(f)["returns"] in prompt), "daily")
    return _Reference(implied, np.concatenate([shown, implied]), periods * 252 / frequency.per_year(freq), prompt)


def _labels(b: claims.Batch, tickers_: list) -> list:
    wrong = []
    for m, i in zip(found := b.finditer(_LABELLED, "label"), b.owner(found), strict=True):
        letter, name = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        tickers = list(tickers_[i])
        letters = answers.labels(len(tickers))
        if letter in letters and name in tickers and tickers[letters.index(letter)] != name:
            wrong.append(m)
    return wrong


@functools.lru_cache(maxsize=4096)
def _prompt_words(prompt: str) -> frozenset[str]:
    """The ticker-like words a prompt itself shows: its tickers, a signal's name ("RSI"), a headline's "FDA"."""
    return frozenset(m.group(1) for m in _TICKER.finditer(prompt))


def _unknown_tickers(b: claims.Batch, tickers_: list) -> np.ndarray:
    found = b.finditer(_TICKER, "ticker")
    words = {(int(i), m.group(1)) for m, i in zip(found, b.owner(found), strict=True)}
    # each prompt's own words read once per batch: _prompt_words' cache holds 4,096 prompts,
    # and a round of a large run has more (100k completions of 12,500 states: 1.3 of 7.8 s)
    shown: dict[int, frozenset[str]] = {}
    unknown = []
    for i, w in words:
        if w in COMMON or w in tickers_[i]:
            continue
        p = b.prompt_of[i]
        if p not in shown:
            shown[p] = _prompt_words(b.unique[p])
        if w not in shown[p]:
            unknown.append(i)
    return np.bincount(np.asarray(unknown, dtype=np.int64), minlength=b.n).astype(np.int64)


def check_many(completions, prompts_, tickers_) -> pd.DataFrame:
    """:class:`Claims` of each completion against its own prompt and tickers, a row each.

    Only the completions that may hold a claim (:func:`may_claim`) reach the rules, and each
    rule only those that may hold its kind; each rule's pattern scans them at once, joined
    by a NUL (C speed, where a loop ran seven scans per completion in Python), and the
    numbers claimed are compared with their prompts' values as arrays. A batch in which a
    completion holds a NUL itself is checked one completion at a time.
    """
    texts = pc.fill_null(pa.array(completions, pa.string()), "")  # an Arrow-backed column: no copy
    rows = np.flatnonzero(may_claim(texts))
    candidates = texts.take(rows)
    maybe = {rule: may_claim(candidates, pattern) for rule, pattern in _MAY.items()}
    found = _check(candidates.to_pylist(), _take(prompts_, rows), _take(tickers_, rows), maybe)
    out = pd.DataFrame(0, index=range(len(texts)), columns=list(Claims._fields), dtype=np.int64)
    out.iloc[rows] = found.to_numpy()
    return out


def _take(values, rows: np.ndarray) -> list:
    """The given rows of a column (a Series, or anything lists.pylist takes) as a list."""
    if isinstance(values, pd.Series):
        return values.iloc[rows].tolist()
    values = lists.pylist(values)
    return [values[i] for i in rows]


def _check(texts: list[str], prompts_: list[str], tickers_: list, maybe: dict | None = None) -> pd.DataFrame:
    """check_many's rules on every text given; each rule's patterns scan only the texts that
    ``maybe`` (rule -> mask of :func:`may_claim`, if given) marks for it."""
    if len(texts) > 1 and any(claims.SEP in t for t in texts):
        rows = [_check([t], [p], [k]) for t, p, k in zip(texts, prompts_, tickers_, strict=True)]
        return pd.concat(rows, ignore_index=True)
    b = claims.Batch(texts, prompts_, _reference, maybe)
    percents = b.finditer(_PERCENT, "percent")
    wrong_sums, results = claims.arithmetic(b)
    figures, unshown = claims.figures(b, results)
    columns = (
        b.counts(percents),
        b.counts(figures),
        b.counts(b.unsupported(percents, "implied", lambda ref, rows: np.maximum(0.05, 0.05 * np.abs(ref)))),
        b.counts(unshown),
        b.counts(wrong_sums),
        b.counts(_labels(b, tickers_)),
        b.counts(claims.days(b, _TRADING_DAYS)),
        _unknown_tickers(b, tickers_),
    )
    return pd.DataFrame(dict(zip(Claims._fields, columns, strict=True)))


def check(completion: str, prompt: str, tickers) -> Claims:
    """The claims of one completion against the prompt of its state (see the module docstring)."""
    return Claims(*(int(v) for v in check_many([completion], [prompt], [tickers]).iloc[0]))


def count(completion: str, prompt: str, tickers) -> int:
    """Unsupported claims of every kind in one completion (what the grounding reward charges)."""
    return int(with_totals(check_many([completion], [prompt], [tickers]))["unsupported_claims"].iloc[0])
