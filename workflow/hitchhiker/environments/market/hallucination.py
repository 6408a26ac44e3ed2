"""What an answer claims that its state does not support.

The environment knows exactly what it showed, so every completion (the action and its
rationale, valid or not) is checked against its prompt by six rules. Each rule counts
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
score; a percent claim or a checked figure that no rule faults is supported, what
grounding.supported_claim_bonus pays for (a valid answer's), so that the reward does not
favour an answer that states nothing. These measure what the model says about the data, not whether its decision was
right: text with no numbers, names or dates has none.
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
from hitchhiker.environments.market import answers, lists, prompts

# Each pattern opens with a lookahead for the characters a match can start with (and _SUM
# for the "=" it needs): Python's re then rejects most positions of the joined text at once,
# where an opening look-behind, \b or an IGNORECASE alternation were tried at every one
# (2-4x faster scans, the same matches: benchmarks/score). _FIGURE's unsigned number is matched
# at its first digit, not at a space before it: the same number, sign and end either way.
_NUM = r"[+-]?\s?\d+(?:\.\d+)?"
_PERCENT = re.compile(r"(?=[+\-\d])(?<![\w.])([+-]?)(\d+(?:\.\d+)?)\s*%")
_FIGURE = re.compile(r"(?=[+\-\d])(?<![\w.=])([+-]?)\s?(\d+\.(\d+))(?![\d.]*\s*%)(?!\d)")
_SUM = re.compile(rf"(?=[+\-\d][+\-\d.\s]*=)(?<![\w.])((?:{_NUM}\s*){{2,}})=\s*({_NUM})(?!\d)")
_TICKER = re.compile(r"(?=[A-Z])(?<![\w.^=-])([A-Z][A-Z.\-]{0,3}[A-Z])(?![\w.^=-]*[a-z0-9])")
_LABELLED = re.compile(
    r"(?=[A-Z])(?:\b([A-Z])\s?\(\s*([A-Za-z0-9.^=-]{1,16})\s*\)|\b([A-Z][A-Z0-9.^=-]{1,15})\s?\(\s*([A-Z])\s*\))"
)
_TRADING_DAYS = {"day": 1, "session": 1, "week": 252 / 52, "month": 21, "quarter": 63, "year": 252}
_WEEKDAY = re.compile(r"(?=[mtwfs])\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b", re.IGNORECASE)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"(?=[\dJFMASOND])\b(\d{{4}}-\d\d-\d\d|(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?)\b")
_LOOKBACK = re.compile(
    r"(?=[lp])\b(?:last|past|previous|prior|preceding)\s+(\d+)\s+(?:trading\s+)?(day|session|week|month|quarter|year)s?\b",
    re.IGNORECASE,
)

# Where a rule's pattern could match, in RE2's syntax: Arrow scans the whole column with it
# in C++ and Python's re checks only the completions it matches (4% of benchmarks/score's
# mix, about two thirds of SmolLM2's completions). Each alternative is implied by its rule's
# pattern (a superset: no look-around, \b or cut-off figure exclusion), stated for ASCII
# text, where Python's \d, \w and \s are the classes spelled out here (its \s also holds
# \x1c-\x1f); a completion with any other character is checked in full.
# tests/test_metrics.py checks that the counts equal those of the rules run on every text.
_WS_CHARS = r"\t\n\x0b\x0c\r \x1c-\x1f"
_MAY = {  # each rule's patterns -> where they could match
    "percent": r"%",  # _PERCENT
    "figure": r"(?:^|[^0-9A-Za-z_.=])[0-9]+\.[0-9]+[^0-9]",  # _FIGURE, one that does not end the text
    "sum": rf"[0-9][0-9.+\-{_WS_CHARS}]*=[{_WS_CHARS}]*[+\-]?[{_WS_CHARS}]?[0-9]",  # _SUM
    "label": rf"[A-Z0-9.^=\-][{_WS_CHARS}]?\(",  # _LABELLED
    "day": "|".join(  # _WEEKDAY, _DATE, _LOOKBACK
        [
            r"(?i:monday|tuesday|wednesday|thursday|friday|saturday|sunday)",
            rf"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}|(?:{_MONTHS})[{_WS_CHARS}]+[0-9]",
            rf"(?i:last|past|previous|prior|preceding)[{_WS_CHARS}]+[0-9]",
        ]
    ),
    "ticker": r"(?:^|[^0-9A-Za-z_.^=\-])[A-Z][A-Z.\-]{0,3}[A-Z]",  # _TICKER
}


def may_claim(texts: pa.Array, pattern: str = "|".join(_MAY.values())) -> np.ndarray:
    """Which texts could hold a claim (a superset of those that do; see _MAY): of any rule,
    or of the rule whose ``_MAY`` pattern is given."""
    other = pc.invert(pc.string_is_ascii(texts))
    return pc.or_(other, pc.match_substring_regex(texts, pattern)).to_numpy(zero_copy_only=False)


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
    each kind. A percent claim or a figure that is not unsupported is supported (what
    grounding.supported_claim_bonus pays for)."""

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


@functools.lru_cache(maxsize=4096)
def _reference(prompt: str) -> _Reference:
    """What a prompt shows, parsed once: a state's B samples (and its rounds) share the prompt."""
    sections = prompts.shown(prompt)
    implied = supported_returns(sections)
    shown = np.asarray([v for section in sections.values() for vals in section.values() for v in vals], dtype=float)
    periods = max((len(v) for key, sec in sections.items() if key != "signals" for v in sec.values()), default=0)
    freq = next((f for f in frequency.FREQUENCIES if prompts.headers(f)["returns"] in prompt), "daily")
    return _Reference(implied, np.concatenate([shown, implied]), periods * 252 / frequency.per_year(freq))


def _value(text: str) -> float:
    """A number of _NUM, whose sign and digits any whitespace may part ("+\t1")."""
    return float("".join(text.split()))


_SEP = "\x00"  # joins the completions: no rule's pattern or look-around matches it or across it


class _Batch:
    """Completions joined into one text, and what each one's prompt shows, as arrays."""

    def __init__(self, texts: list[str], prompts_: list[str], tickers_: list[list[str]], maybe: dict | None):
        self.n, self.prompts, self.tickers, self.maybe = len(texts), prompts_, tickers_, maybe
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        self.starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        self.ends = self.starts + lengths
        self.text = _SEP.join(texts)
        self.prompt_of, self.unique = pd.factorize(np.asarray(prompts_, dtype=object))
        self.parsed: dict[int, _Reference] = {}  # each prompt parsed once, and only if a claim needs it

    def references(self, matches) -> tuple[np.ndarray, list[_Reference]]:
        """Each match's row in the references of the prompts it needs."""
        needed, row = np.unique(self.prompt_of[self.owner(matches)], return_inverse=True)
        for i in needed:
            if i not in self.parsed:
                self.parsed[i] = _reference(self.unique[i])
        return row, [self.parsed[i] for i in needed]

    def finditer(self, pattern: re.Pattern, rule: str) -> list:
        """The matches of ``pattern``, a ``rule``'s, in every completion or, given the masks
        of :func:`may_claim`, in those that may hold such a claim (the same matches: the
        others hold none). A scan of each such completion on its own (its span of the joined
        text, where the NUL either side matches nothing) pays when they are a minority."""
        rows = None if self.maybe is None else np.flatnonzero(self.maybe[rule])
        if rows is None or len(rows) > self.n // 2:
            return list(pattern.finditer(self.text))
        return [m for i in rows for m in pattern.finditer(self.text, self.starts[i], self.ends[i])]

    def owner(self, matches) -> np.ndarray:
        """The completion each match lies in."""
        return np.searchsorted(self.starts, np.fromiter((m.start() for m in matches), np.int64), side="right") - 1

    def counts(self, matches) -> np.ndarray:
        """Matches per completion."""
        return np.bincount(self.owner(matches), minlength=self.n).astype(np.int64)

    def unsupported(self, matches, table: str, tol) -> list:
        """The numeric matches (sign in group 1, number in group 2) that no value of their
        prompt's ``table`` (a :class:`_Reference` field) supports within ``tol(ref, rows)``
        (``rows`` the matches' slice), compared with absolute values when the number is
        written without a sign."""
        if not matches:
            return []
        signs = [m.group(1) for m in matches]
        value = np.array([float(m.group(2)) * (-1 if s == "-" else 1) for m, s in zip(matches, signs, strict=True)])
        signed = np.array([bool(s) for s in signs])
        row, refs = self.references(matches)
        values = lists.padded([getattr(r, table) for r in refs])
        close = np.empty(len(matches), dtype=bool)
        # 4,096 matches at a time: (matches x values) temporaries that fit in the cache, 15x
        # faster than one array of 400k rows at the same arithmetic
        for start in range(0, len(matches), 4096):
            rows = slice(start, start + 4096)
            ref = np.where(signed[rows, None], values[row[rows]], np.abs(values[row[rows]]))
            close[rows] = (np.abs(ref - value[rows, None]) <= tol(ref, rows)).any(axis=1)
        return [m for m, ok in zip(matches, close, strict=True) if not ok]


def _arithmetic(b: _Batch) -> tuple[list, set[int]]:
    """Sums that miss their result by more than the figures' rounding; where results stand."""
    wrong, results = [], set()
    for m in b.finditer(_SUM, "sum"):
        terms = re.findall(_NUM, m.group(1))
        total, result = sum(map(_value, terms)), _value(m.group(2))
        decimals = max(len(t.partition(".")[2]) for t in [*terms, m.group(2)])
        if abs(total - result) > (len(terms) + 1) * 0.5 * 10.0**-decimals + 1e-9:
            wrong.append(m)
        results.add(m.start(2))
    return wrong, results


def _figures(b: _Batch, results: set[int]) -> tuple[list, list]:
    """The figures checked (not a sum's result nor the text's last word), and those not shown
    at the precision written."""
    found = [m for m in b.finditer(_FIGURE, "figure") if m.start(2) not in results and m.start(1) not in results]
    found = [m for m, i in zip(found, b.owner(found), strict=True) if m.end() != b.ends[i]]
    tol = np.array([0.5 * 10.0 ** -len(m.group(3)) + 1e-9 for m in found])[:, None]
    return found, b.unsupported(found, "values", lambda ref, rows: tol[rows])


def _labels(b: _Batch) -> list:
    wrong = []
    for m, i in zip(found := b.finditer(_LABELLED, "label"), b.owner(found), strict=True):
        letter, name = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        tickers = list(b.tickers[i])
        letters = answers.labels(len(tickers))
        if letter in letters and name in tickers and tickers[letters.index(letter)] != name:
            wrong.append(m)
    return wrong


def _days(b: _Batch) -> list:
    dates = b.finditer(_DATE, "day")
    back = b.finditer(_LOOKBACK, "day")
    row, refs = b.references(back)
    shown = np.array([r.shown_days for r in refs])[row]
    return [
        *b.finditer(_WEEKDAY, "day"),
        *(m for m, i in zip(dates, b.owner(dates), strict=True) if m.group(1) not in b.prompts[i]),
        *(
            m
            for m, d in zip(back, shown, strict=True)
            if int(m.group(1)) * _TRADING_DAYS[m.group(2).lower()] > d + 1e-9
        ),
    ]


@functools.lru_cache(maxsize=4096)
def _prompt_words(prompt: str) -> frozenset[str]:
    """The ticker-like words a prompt itself shows: its tickers, a signal's name ("RSI"), a headline's "FDA"."""
    return frozenset(m.group(1) for m in _TICKER.finditer(prompt))


def _unknown_tickers(b: _Batch) -> np.ndarray:
    found = b.finditer(_TICKER, "ticker")
    words = {(int(i), m.group(1)) for m, i in zip(found, b.owner(found), strict=True)}
    unknown = [
        i for i, w in words if w not in COMMON and w not in set(b.tickers[i]) and w not in _prompt_words(b.prompts[i])
    ]
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
    if len(texts) > 1 and any(_SEP in t for t in texts):
        rows = [_check([t], [p], [k]) for t, p, k in zip(texts, prompts_, tickers_, strict=True)]
        return pd.concat(rows, ignore_index=True)
    b = _Batch(texts, prompts_, tickers_, maybe)
    percents = b.finditer(_PERCENT, "percent")
    wrong_sums, results = _arithmetic(b)
    figures, unshown = _figures(b, results)
    columns = (
        b.counts(percents),
        b.counts(figures),
        b.counts(b.unsupported(percents, "implied", lambda ref, rows: np.maximum(0.05, 0.05 * np.abs(ref)))),
        b.counts(unshown),
        b.counts(wrong_sums),
        b.counts(_labels(b)),
        b.counts(_days(b)),
        _unknown_tickers(b),
    )
    return pd.DataFrame(dict(zip(Claims._fields, columns, strict=True)))


def check(completion: str, prompt: str, tickers) -> Claims:
    """The claims of one completion against the prompt of its state (see the module docstring)."""
    return Claims(*(int(v) for v in check_many([completion], [prompt], [tickers]).iloc[0]))


def count(completion: str, prompt: str, tickers) -> int:
    """Unsupported claims of every kind in one completion (what the grounding reward charges)."""
    return int(with_totals(check_many([completion], [prompt], [tickers]))["unsupported_claims"].iloc[0])
