"""The claim checks every environment can share: what a completion says that its prompt
does not show. An environment reads its prompt into a reference (what it shows, as numbers
and days) and calls these rules; the market adds its own (returns in percent, labels,
tickers: environments/market/hallucination.py) and the weather its rain statements.

figure (a number presented as a shown one)
    A plain decimal number (no "%") is read as a figure from the prompt. It is supported
    when, at the precision written, it equals a value of the reference's ``values`` (what
    the prompt shows and what it implies: the market's compounded returns, the weather's
    rain totals). Not checked: a number right after "=" (a listwise weight "A=0.5"), the
    result of a sum (arithmetic, below), and a number that ends the text (it may be cut
    off by max_new_tokens, "+1.0" of "+1.06").
arithmetic (wrong arithmetic)
    Two or more signed numbers followed by "= r" claim that they sum to r; wrong when the
    sum misses r by more than the rounding of the figures written ("+0.13 +1.44 = +0.25").
day (a day the prompt does not show)
    "last/past/previous/prior N days" (or weeks, months, ...) with N more than the days
    shown (``shown_days`` in the environment's own days: trading days for the market,
    calendar days for the weather); a weekday name that is not one of ``weekdays``; a
    calendar date (2021-03-04, March 4) not in ``dates``.

Speed: the completions of a batch are joined into one text and each rule's pattern scans
it once (C speed), and the numbers claimed are compared with their prompts' values as
arrays; a prompt is read into its reference only when a claim needs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# Each pattern opens with a lookahead for the characters a match can start with (and SUM
# for the "=" it needs): Python's re then rejects most positions of the joined text at once,
# where an opening look-behind, \b or an IGNORECASE alternation were tried at every one
# (2-4x faster scans, the same matches: benchmarks/score). FIGURE's unsigned number is matched
# at its first digit, not at a space before it: the same number, sign and end either way.
NUM = r"[+-]?\s?\d+(?:\.\d+)?"
FIGURE = re.compile(r"(?=[+\-\d])(?<![\w.=])([+-]?)\s?(\d+\.(\d+))(?![\d.]*\s*%)(?!\d)")
SUM = re.compile(rf"(?=[+\-\d][+\-\d.\s]*=)(?<![\w.])((?:{NUM}\s*){{2,}})=\s*({NUM})(?!\d)")
WEEKDAY = re.compile(r"(?=[mtwfs])\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b", re.IGNORECASE)
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATE = re.compile(rf"(?=[\dJFMASOND])\b(\d{{4}}-\d\d-\d\d|(?:{MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?)\b")
LOOKBACK = re.compile(
    r"(?=[lp])\b(?:last|past|previous|prior|preceding)\s+(\d+)\s+(?:trading\s+)?(day|session|week|month|quarter|year)s?\b",
    re.IGNORECASE,
)
CALENDAR_DAYS = {"day": 1, "session": 1, "week": 7, "month": 365.25 / 12, "quarter": 365.25 / 4, "year": 365.25}

# Where a rule's pattern could match, in RE2's syntax: Arrow scans the whole column with it
# in C++ and Python's re checks only the completions it matches. Each alternative is implied
# by its rule's pattern (a superset: no look-around, \b or cut-off figure exclusion), stated
# for ASCII text, where Python's \d, \w and \s are the classes spelled out here (its \s also
# holds \x1c-\x1f); a completion with any other character is checked in full.
WS_CHARS = r"\t\n\x0b\x0c\r \x1c-\x1f"
MAY = {  # each rule's patterns -> where they could match
    "figure": r"(?:^|[^0-9A-Za-z_.=])[0-9]+\.[0-9]+[^0-9]",  # FIGURE, one that does not end the text
    "sum": rf"[0-9][0-9.+\-{WS_CHARS}]*=[{WS_CHARS}]*[+\-]?[{WS_CHARS}]?[0-9]",  # SUM
    "day": "|".join(  # WEEKDAY, DATE, LOOKBACK
        [
            r"(?i:monday|tuesday|wednesday|thursday|friday|saturday|sunday)",
            rf"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}|(?:{MONTHS})[{WS_CHARS}]+[0-9]",
            rf"(?i:last|past|previous|prior|preceding)[{WS_CHARS}]+[0-9]",
        ]
    ),
}


def may_claim(texts: pa.Array, pattern: str) -> np.ndarray:
    """Which texts could hold a claim of ``pattern`` (a superset of those that do)."""
    other = pc.invert(pc.string_is_ascii(texts))
    return pc.or_(other, pc.match_substring_regex(texts, pattern)).to_numpy(zero_copy_only=False)


def value(text: str) -> float:
    """A number of NUM, whose sign and digits any whitespace may part ("+\t1")."""
    return float("".join(text.split()))


def padded(arrays: list[np.ndarray]) -> np.ndarray:
    """1-d arrays as the rows of one (rows, longest) array, NaN after each row's end."""
    k = np.fromiter(map(len, arrays), np.int64, len(arrays))
    out = np.full((len(arrays), max(1, int(k.max(initial=0)))), np.nan)
    out[np.arange(out.shape[1]) < k[:, None]] = np.concatenate([np.asarray(a, dtype=float) for a in arrays] or [[]])
    return out


SEP = "\x00"  # joins the completions: no rule's pattern or look-around matches it or across it


class Batch:
    """Completions joined into one text, and what each one's prompt shows: ``reference(prompt)``
    reads a prompt (an environment's reader, cached by the environment) into an object whose
    fields the rules read (values, shown_days, weekdays, dates)."""

    def __init__(self, texts: list[str], prompts: list[str], reference: Callable, maybe: dict | None = None):
        self.n, self.prompts, self.reference, self.maybe = len(texts), prompts, reference, maybe
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        self.starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        self.ends = self.starts + lengths
        self.text = SEP.join(texts)
        self.prompt_of, self.unique = pd.factorize(np.asarray(prompts, dtype=object))
        self.parsed: dict[int, object] = {}  # each prompt read once, and only if a claim needs it

    def references(self, matches) -> tuple[np.ndarray, list]:
        """Each match's row in the references of the prompts it needs."""
        needed, row = np.unique(self.prompt_of[self.owner(matches)], return_inverse=True)
        for i in needed:
            if i not in self.parsed:
                self.parsed[i] = self.reference(self.unique[i])
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
        prompt's ``table`` (a reference field) supports within ``tol(ref, rows)`` (``rows``
        the matches' slice), compared with absolute values when the number is written
        without a sign."""
        if not matches:
            return []
        signs = [m.group(1) for m in matches]
        number = np.array([float(m.group(2)) * (-1 if s == "-" else 1) for m, s in zip(matches, signs, strict=True)])
        signed = np.array([bool(s) for s in signs])
        row, refs = self.references(matches)
        values = padded([getattr(r, table) for r in refs])
        close = np.empty(len(matches), dtype=bool)
        # 4,096 matches at a time: (matches x values) temporaries that fit in the cache, 15x
        # faster than one array of 400k rows at the same arithmetic
        for start in range(0, len(matches), 4096):
            rows = slice(start, start + 4096)
            ref = np.where(signed[rows, None], values[row[rows]], np.abs(values[row[rows]]))
            close[rows] = (np.abs(ref - number[rows, None]) <= tol(ref, rows)).any(axis=1)
        return [m for m, ok in zip(matches, close, strict=True) if not ok]


def arithmetic(b: Batch) -> tuple[list, set[int]]:
    """Sums that miss their result by more than the figures' rounding; where results stand."""
    wrong, results = [], set()
    for m in b.finditer(SUM, "sum"):
        terms = re.findall(NUM, m.group(1))
        total, result = sum(map(value, terms)), value(m.group(2))
        decimals = max(len(t.partition(".")[2]) for t in [*terms, m.group(2)])
        if abs(total - result) > (len(terms) + 1) * 0.5 * 10.0**-decimals + 1e-9:
            wrong.append(m)
        results.add(m.start(2))
    return wrong, results


def figures(b: Batch, results: set[int]) -> tuple[list, list]:
    """The figures checked (not a sum's result nor the text's last word), and those not shown
    at the precision written."""
    found = [m for m in b.finditer(FIGURE, "figure") if m.start(2) not in results and m.start(1) not in results]
    found = [m for m, i in zip(found, b.owner(found), strict=True) if m.end() != b.ends[i]]
    tol = np.array([0.5 * 10.0 ** -len(m.group(3)) + 1e-9 for m in found])[:, None]
    return found, b.unsupported(found, "values", lambda ref, rows: tol[rows])


def days(b: Batch, units: dict[str, float]) -> list:
    """Weekdays not among the reference's ``weekdays``, dates not in its ``dates`` (a set of
    date texts, or the prompt's own text) and look-backs longer than its ``shown_days``, in
    ``units`` (days per day, week, month, ... in the environment's own days)."""
    out = []
    for pattern, keep in (
        (WEEKDAY, lambda m, r: m.group(1).lower() not in r.weekdays),
        (DATE, lambda m, r: m.group(1) not in r.dates),
        (LOOKBACK, lambda m, r: int(m.group(1)) * units[m.group(2).lower()] > r.shown_days + 1e-9),
    ):
        found = b.finditer(pattern, "day")
        if found:
            row, refs = b.references(found)
            out += [m for m, i in zip(found, row, strict=True) if keep(m, refs[i])]
    return out
