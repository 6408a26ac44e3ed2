"""What a weather answer's reason says, checked against the days its prompt shows.

The prompt shows one line a day ("2015-03-04: rain 3.3 mm, high 8.3 C, low 2.2 C"), the last
one today. A reason (the text after yes or no) is read clause by clause (split at . , ; ! ?
and at but, and, while, though, however):

statement      a clause that says it rained or it was dry: rain words (rain, rained, wet,
               showers, drizzle, precipitation, storm) or dry words (dry, sunny, clear, no
               rain, did not rain), or a figure in mm (above weather.rain_mm: rain; else
               dry), about a day: the day it names (a date or weekday shown, "today",
               "yesterday") or, naming none, the days shown ("the last N days": those). A
               clause about tomorrow (tomorrow, will, likely, chance, forecast, expect) is
               the forecast itself, not evidence. A clause in the prompt's own line form
               ("2015-03-04: rain 3.3 mm") is a recital: it is checked (it holds, its
               figures are shown) but argues for nothing, as a copied figure earns nothing
               (docs/evaluation.md). Read as an argument, SmolLM2 trained on the reasons it
               paid recited today's line in 46% of its answers (weather_claims seed 1 at
               3d5bd5c): a third of the paid reasons were that copy.
holds          a statement about one day holds when that day rained (precipitation above
               rain_mm) and it says rain, or did not and it says dry; about several days,
               "rain" holds when any of them rained and "dry" when none did. A reason is
               supported (reason_supported) when every statement holds and the answer makes
               no unsupported claim of any kind.
argues for     "yes" for a rain statement, "no" for a dry one (persistence: tomorrow as the
               evidence), recitals left out. The statements about the latest day named
               decide; without one, those about the days shown, when they agree. Statements
               that disagree argue for nothing.
claims         besides the shared rules of environments/claims.py (a figure not shown, wrong
               arithmetic, a day not shown: weekdays and dates of the days shown and of
               tomorrow are shown), a statement that does not hold is an unsupported claim
               of kind ``rain_statement``.

What it cannot read: temperature, wind or cloud arguments ("it got colder"), which argue for
nothing here; a statement it misreads is as likely to count for an answer as against it.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker.environments import claims

KINDS = ("figure", "arithmetic", "day", "rain_statement")  # not "rain": the outcome's column
RATES = {  # each kind's rate (answers with at least one such claim) as metrics.json names it
    "figure": "unshown_figure_rate",
    "arithmetic": "wrong_arithmetic_rate",
    "day": "unshown_day_rate",
    "rain_statement": "wrong_rain_rate",
}
_LINE = re.compile(  # weather.LINE, with the date in three parts
    r"^(\d{4})-(\d\d)-(\d\d): rain (-?\d+\.\d) mm, high (-?\d+\.\d) C, low (-?\d+\.\d) C(?:, wind (-?\d+\.\d) m/s)?$"
)
_THRESHOLD = re.compile(r"Will it rain tomorrow \(more than ([\d.]+) mm\)\?")
# a stop or comma that is no decimal point, or ; ! ? a line break, or a conjunction
_CLAUSES = re.compile(r"(?:(?<!\d)[.,]|[.,](?!\d)|[;!?\n])+|\b(?:but|and|while|whereas|though|although|however)\b")
_FORECAST = re.compile(
    r"\b(?:tomorrow|will|would|going to|likely|chance|forecast\w*|expect\w*|predict\w*|probabl\w*)\b"
)
_DRY = re.compile(
    r"\b(?:dry|drier|sunny|sunshine|clear|no (?:rain|precipitation|showers?)|without rain"
    r"|(?:did|does|has|have|had|was|is|were)\s*(?:not|n't)\s+(?:\w+\s+)?(?:rain\w*|wet))\b"
)
_RAIN = re.compile(r"\b(?:rain\w*|wet|showers?|drizzl\w*|precipitation|storm\w*|downpour\w*)\b")
_MM = re.compile(r"(?<!than )(\d+(?:\.\d+)?)\s*mm\b")  # not the question's threshold ("more than 0 mm")
_TODAY = re.compile(r"\b(?:today|this (?:morning|afternoon|evening)|tonight|currently|right now)\b")
_YESTERDAY = re.compile(r"\byesterday\b")
_RECITAL = re.compile(r"\d{4}-\d\d-\d\d\s*:\s*(?:rain\s*)?-?\d+(?:\.\d+)?\s*mm\b")  # a line's opening, copied
_ISO = re.compile(r"\b(\d{4}-\d\d-\d\d)\b")
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b")
_MONTH_DAY = re.compile(rf"\b((?:{claims.MONTHS.lower()})\s+\d{{1,2}})(?:st|nd|rd|th)?\b")


class Shown(NamedTuple):
    """What a weather prompt shows, as the claim rules read it."""

    values: np.ndarray  # every reading shown, and the rain totals of the last 2, 3, ... days
    shown_days: float
    weekdays: frozenset  # of the days shown and of tomorrow, lower case
    dates: frozenset  # "2015-03-04", "March 4", "March 4th" of the days shown and of tomorrow
    rain: np.ndarray  # each day's precipitation, oldest first
    day_of: dict  # "2015-03-04", "march 4" and "wednesday": the day's position
    rain_mm: float


@functools.lru_cache(maxsize=4096)
def shown(prompt: str) -> Shown:
    """A weather prompt read back (its lines as weather.render writes them)."""
    rows = [m for m in map(_LINE.match, prompt.splitlines()) if m]
    days = pd.DatetimeIndex([f"{m[1]}-{m[2]}-{m[3]}" for m in rows])
    readings = np.array([[np.nan if v is None else float(v) for v in m.groups()[3:]] for m in rows]).reshape(-1, 4)
    rain = readings[:, 0]
    totals = np.cumsum(rain[::-1])[1:]
    every = days.append(days[-1:] + pd.Timedelta(days=1)) if len(days) else days
    day_of = {}  # a later day with the same weekday or month and day wins: the days shown are its window
    for i, d in enumerate(days):
        day_of |= {f"{d:%Y-%m-%d}": i, f"{d:%B} {d.day}".lower(): i, f"{d:%A}".lower(): i}
    dates = {f"{d:%Y-%m-%d}" for d in every} | {f"{d:%B} {d.day}{s}" for d in every for s in ("", _ordinal(d.day))}
    threshold = _THRESHOLD.search(prompt)
    return Shown(
        values=np.concatenate([readings[~np.isnan(readings)], totals]),
        shown_days=float(len(days)),
        weekdays=frozenset(f"{d:%A}".lower() for d in every),
        dates=frozenset(dates),
        rain=rain,
        day_of=day_of,
        rain_mm=float(threshold[1]) if threshold else 0.0,
    )


def _ordinal(n: int) -> str:
    """The suffix of n as an ordinal: 1st, 2nd, 3rd, 4th, 11th, 21st."""
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def statements(reason: str, ref: Shown) -> list[tuple[int | None, bool, bool, bool]]:
    """Each statement of ``reason`` (lower case): (the day's position, None for several days;
    whether it says rain; whether it holds; whether it is a recital of a line)."""
    out = []
    wet = ref.rain > ref.rain_mm
    last = len(wet) - 1
    for clause in _CLAUSES.split(reason):
        if not clause.strip() or _FORECAST.search(clause):
            continue
        mm = _MM.search(clause)
        if mm:
            rain = float(mm[1]) > ref.rain_mm
        elif _DRY.search(clause):
            rain = False
        elif _RAIN.search(clause):
            rain = True
        else:
            continue
        named = [ref.day_of.get(m[1]) for pattern in (_ISO, _MONTH_DAY, _WEEKDAY) for m in pattern.finditer(clause)]
        if any(d is None for d in named):  # a day not shown: the day rule counts it, no statement here
            continue
        days, back = slice(0, last + 1), claims.LOOKBACK.search(clause)
        if named:
            day = max(named)
        elif _TODAY.search(clause):
            day = last
        elif _YESTERDAY.search(clause) and last >= 1:
            day = last - 1
        else:  # the days shown, or the last N of them
            day = None
            if back and back[2].lower() == "day":
                days = slice(max(0, last + 1 - int(back[1])), last + 1)
        holds = (bool(wet[day]) if day is not None else bool(wet[days].any())) == rain
        out.append((day, rain, holds, bool(_RECITAL.search(clause))))
    return out


def argues(said: list[tuple[int | None, bool, bool, bool]]) -> str | None:
    """The answer the statements argue for, recitals left out: those about the latest day
    named, else those about several days, when they agree; None where none or they disagree."""
    said = [s for s in said if not s[3]]
    dated = [s for s in said if s[0] is not None]
    if dated:
        latest = max(s[0] for s in dated)
        said = [s for s in dated if s[0] == latest]
    says = {s[1] for s in said}
    return None if len(says) != 1 else ("yes" if says.pop() else "no")


def check_many(completions: pd.Series, prompts: list[str], answers: pd.Series) -> pd.DataFrame:
    """Per completion (with its prompt and its parsed answer, NA where invalid): figures
    (checked figures stated), a count per KINDS of unsupported claims, reason_consistency and
    reason_supported (base.py's score contract)."""
    texts = completions.fillna("").astype(str).tolist()
    b = claims.Batch(texts, prompts, shown, _maybe(texts))
    wrong_sums, results = claims.arithmetic(b)
    found, unshown = claims.figures(b, results)
    out = pd.DataFrame(
        {
            "figures": b.counts(found),
            "figure": b.counts(unshown),
            "arithmetic": b.counts(wrong_sums),
            "day": b.counts(claims.days(b, claims.CALENDAR_DAYS)),
        },
        index=completions.index,
    )
    rain, consistency, supported = [], [], []
    for text, prompt, answer in zip(texts, prompts, answers.tolist(), strict=True):
        reason = text.lower().split(None, 1)[1:]  # after the answer's first word
        said = statements(reason[0], shown(prompt)) if reason else []
        rain.append(sum(not s[2] for s in said))
        side = argues(said)
        consistency.append(np.nan if pd.isna(answer) else 0.0 if side is None else 1.0 if side == answer else -1.0)
        supported.append(np.nan if not said else float(all(s[2] for s in said)))
    out = out.assign(rain_statement=rain, reason_consistency=consistency)
    # a supported reason: every statement holds and the answer makes no unsupported claim
    clean = out[list(KINDS)].sum(axis=1) == 0
    return out.assign(reason_supported=pd.Series(supported, index=out.index).where(lambda x: x.isna() | clean, 0.0))


def _maybe(texts: list[str]) -> dict:
    """claims.Batch's masks: which texts each shared rule's pattern could match in."""
    arr = pa.array(texts, pa.string())
    return {rule: claims.may_claim(arr, pattern) for rule, pattern in claims.MAY.items()}


def indicators(scored: pd.DataFrame) -> pd.DataFrame:
    """Per answer, as the market's hallucination.indicators: any_rate, a rate per kind (RATES),
    unsupported_per_answer, stating_figures_rate, supported_per_answer, completion_chars."""
    out = pd.DataFrame({RATES[k]: (scored[k] > 0).astype(float) for k in KINDS}, index=scored.index)
    out.insert(0, "any_rate", (scored["unsupported_claims"] > 0).astype(float))
    out["unsupported_per_answer"] = scored["unsupported_claims"].astype(float)
    out["stating_figures_rate"] = (scored["claims"] > 0).astype(float)
    out["supported_per_answer"] = scored["supported_claims"].astype(float)
    out["completion_chars"] = (
        pc.utf8_length(pa.array(scored["completion"].fillna(""), pa.string()))
        .to_numpy(zero_copy_only=False)
        .astype(float)
    )
    return out
