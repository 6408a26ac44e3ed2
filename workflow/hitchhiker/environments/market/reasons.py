"""What a market answer's reason argues, checked against the returns its prompt shows.

Read for pairwise answers (which of A and B) and elementwise ones (long, flat or short one
ticker); listwise answers are not read (NaN). A reason (the text after the action) is read
clause by clause (split at . , ; ! ? and at but, and, while, whereas, though, however):

statement      a clause with a direction word, up (rose, gained, higher, outperformed,
               positive, stronger, momentum, ...) or down (fell, lost, lower, weaker,
               negative, declined, ...), about a ticker: a label (A, B) or a ticker of the
               state named in it, or, naming none, the one named last before it, or with
               "it"/"its" the answer's own pick; "X ... than Y" compares X with Y. Its period
               is the last one shown where it says so (today, yesterday, last, latest,
               recent day), else the whole window (the compounded return of the periods
               shown). A clause about the future (will, next, tomorrow, expect, likely,
               forecast, predict) restates the question, not evidence; so does a clause
               with both an up and a down word.
holds          "X up": X's return over the period above zero (down: below); "X up than Y":
               X's above Y's (down: below), from the returns section (or the closes,
               converted) at the precision shown.
argues for     pairwise: up for X, down for the other ticker; compared, up for X, down for
               Y. Elementwise: up for long, down for short. Statements that disagree argue
               for nothing, and a flat answer with a reason for a position is inconsistent.

A supported reason (reason_supported) is one whose statements all hold and whose answer
makes no unsupported claim (hallucination.py). What it cannot read: arguments from volume,
signals or headlines (they argue for nothing here), and negations ("did not rise").
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker.environments import claims
from hitchhiker.environments.market import prompts

_CLAUSES = re.compile(r"(?:(?<!\d)[.,]|[.,](?!\d)|[;!?\n])+|\b(?:but|and|while|whereas|though|although|however)\b")
_FUTURE = re.compile(r"\b(?:will|next|tomorrow|going to|expect\w*|likely|forecast\w*|predict\w*)\b")
_UP_WORDS = (
    r"rose|risen|rising|rises|rise|gain\w*|up|higher|highest|increas\w*|climb\w*|positive|strong\w*"
    r"|outperform\w*|better|best|more|uptrend|upward\w*|rall(?:y|ied|ies)|bullish|momentum|grew|grow\w*"
    r"|greater|larger|bigger"
)
_DOWN_WORDS = (
    r"fell|fallen|falling|falls|fall|drop\w*|down|lower|lowest|decreas\w*|declin\w*|negative|weak\w*"
    r"|underperform\w*|worse|worst|less|downtrend|downward\w*|bearish|lost|loss\w*|los(?:es|ing)|slump\w*"
    r"|plung\w*|smaller"
)
_UP, _DOWN = (re.compile(rf"\b(?:{words})\b") for words in (_UP_WORDS, _DOWN_WORDS))
# Where a statement could be (a direction word, any case), in RE2's syntax for Arrow's scan of
# the whole column (claims.may_claim: a text with any non-ASCII character is read in full): a
# text without one has no statement, so only the others reach the Python of statements()
# (benchmarks/score: it read every answer, 85% of the stage on its mix; tests/test_rationales.py
# checks that the results equal those of reading every answer)
_MAY_ARGUE = rf"(?i)\b(?:{_UP_WORDS}|{_DOWN_WORDS})\b".replace(r"\w", "[0-9A-Za-z_]")
_LAST = re.compile(r"\b(?:today|yesterday|last|latest|recent day|most recent)\b")
_THAN = re.compile(r"\bthan\b")
_IT = re.compile(r"\b(?:it|its)\b")


@functools.lru_cache(maxsize=4096)
def _returns(prompt: str) -> tuple[np.ndarray, np.ndarray]:
    """Each ticker's (prompt order) compounded return over the periods shown and its last
    period's, in percent."""
    daily = prompts.section_returns(prompts.shown(prompt))
    total = np.array([100 * (np.prod(1 + r / 100) - 1) if len(r) else np.nan for r in daily])
    last = np.array([r[-1] if len(r) else np.nan for r in daily])
    return total, last


_WORD = re.compile(r"\w+")


def _mentions(clause: str, labels: list[str], names: list[str]) -> list[tuple[int, int]]:
    """Where ``clause`` names a ticker of the state (a label A, B or a ticker, as a whole
    word): (position, the ticker's index), in order. Tickers of word characters only (AAPL)
    are the clause's maximal runs of them that equal one, found with one pattern for every
    state; others (BRK.B, ^GSPC) need the state's own pattern, where the first listed of two
    that match at one place wins (compiling one a state was 40% of benchmarks/score's mix)."""
    tokens = [*labels, *names]
    if all(_WORD.fullmatch(t) for t in tokens):
        return [(m.start(), tokens.index(m[0])) for m in _WORD.finditer(clause) if m[0] in tokens]
    who = re.compile(r"\b(" + "|".join(map(re.escape, tokens)) + r")\b")
    return [(m.start(), tokens.index(m[1])) for m in who.finditer(clause)]


def statements(reason: str, names: list[str], pick: int | None) -> list[tuple[int, int | None, bool, bool]]:
    """Each statement of ``reason`` (the text after the action) about the state's tickers
    ``names`` (prompt order; their labels A, B by position; ``pick`` the answer's, what "it"
    means): (subject, compared-with or None, up, of the last period)."""
    labels = [chr(ord("A") + i) for i in range(len(names))]
    k = len(names)
    out, named = [], None
    for clause in _CLAUSES.split(reason):
        mentions = [(at, i - k if i >= k else i) for at, i in _mentions(clause, labels, names)]
        found = [i for _, i in mentions]
        text = clause.lower()
        up, down = _UP.search(text), _DOWN.search(text)
        if found:
            named = found[-1]
        if _FUTURE.search(text) or bool(up) == bool(down):
            continue
        than = _THAN.search(text)
        if k == 1:
            subject, other = 0, None
            if than:
                continue
        elif than:
            before = [i for at, i in mentions if at < than.start()]
            after = [i for at, i in mentions if at > than.start()]
            subject = before[0] if before else named if named is not None else pick
            other = after[0] if after else None
            if subject is None or other is None or subject == other:
                continue
        else:
            subject = found[0] if found else named if named is not None else pick if _IT.search(text) else None
            other = None
            if subject is None:
                continue
        out.append((subject, other, bool(up), bool(_LAST.search(text))))
    return out


def _holds(statement, total: np.ndarray, last: np.ndarray) -> bool:
    subject, other, up, recent = statement
    value = last if recent else total
    diff = value[subject] - (0.0 if other is None else value[other])
    return bool(diff > 0) if up else bool(diff < 0)


def _favours(statement, k: int) -> int:
    """What the statement argues for: for one ticker +1 (long) or -1 (short), for two the
    ticker's position."""
    subject, other, up, _ = statement
    if k == 1:
        return 1 if up else -1
    if other is not None:
        return subject if up else other
    return subject if up else 1 - subject


def check_many(completions, prompts_, tickers_, weights, valid: np.ndarray, formats) -> pd.DataFrame:
    """Per answer: reason_consistency and reason_supported (before the claims: score makes a
    reason with an unsupported claim unsupported), NaN for listwise answers. An answer whose
    text has no direction word (_MAY_ARGUE) makes no statement: 0.0 and NaN where valid, NaN
    and NaN where not, without reading it."""
    read = np.isin(np.asarray(formats, dtype=object), ["pairwise", "elementwise"])
    texts = pc.fill_null(pa.array(completions, pa.string()), "")
    valid = np.asarray(valid, dtype=bool)
    consistency = np.where(read & valid, 0.0, np.nan)
    supported = np.full(len(consistency), np.nan)
    for i in np.flatnonzero(read & claims.may_claim(texts, _MAY_ARGUE)):
        consistency[i], supported[i] = _argued(completions[i], prompts_[i], tickers_[i], weights[i], valid[i])
    return pd.DataFrame({"reason_consistency": consistency, "reason_supported": supported})


def _argued(text, prompt: str, names, w, ok: bool) -> tuple[float, float]:
    """One readable answer's reason_consistency and reason_supported."""
    names, k = [str(n) for n in names], len(names)
    w = np.asarray(w if ok else [], dtype=float)
    if k == 1:
        took = int(np.sign(w[0])) if len(w) else None
    else:
        took = int(np.argmax(w)) if len(w) and (w == w.max()).sum() == 1 else None
    reason = str(text or "").split(None, 1)[1:]
    said = statements(reason[0], names, took if k > 1 else None) if reason else []
    sides = {_favours(s, k) for s in said}
    side = sides.pop() if len(sides) == 1 else None
    consistency = np.nan if not ok else 0.0 if side is None else 1.0 if side == took else -1.0
    if not said:
        return consistency, np.nan
    total, last = _returns(prompt)
    return consistency, float(all(_holds(s, total, last) for s in said))
