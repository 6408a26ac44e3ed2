"""The answer contract of the market environments: one grammar for every format, and what an
answer earns.

Grammar (case-insensitive; whitespace around the action and inside it is ignored):

    completion := ACTION [ SEP rationale ]
    SEP        := end of text | whitespace | one of . , : ; ! ) -

    elementwise (one ticker):
      ACTION := "long" | "flat" | "short"        weight +1, 0, -1
              | NUMBER                           a weight in [-1, 1] (+ is long), e.g. 0.5
    pairwise (labels A, B) and listwise (labels A, B, C, ... for k tickers):
      ACTION := LABEL                            all of the $1 on that ticker, e.g. B
              | LABEL=NUMBER {[,] LABEL=NUMBER}  weights in [0, 1] summing to 1 (within 0.01);
                                                 labels not named get 0, e.g. A=0.7, B=0.3
              | LABEL > LABEL {> LABEL}          a ranking of all k labels, best first;
                                                 the $1 goes on the first, e.g. C>A>D>B
    NUMBER := [+|-] digits [. digits] | [+|-] . digits

Anything else is invalid, with one reason: ``empty``, ``not_an_action`` (the text does not
start with an action of the state's format), ``unknown_label`` (a label beyond the state's
k), ``bad_weights`` (out of range, repeated, or not summing to 1), ``bad_ranking`` (a
ranking that does not name each label exactly once). The rationale is free text; the
evaluation checks it for claims the state does not support (hitchhiker/environments/market/hallucination.py).

Reward of a valid answer with weights w over the state's tickers, whose simple returns from
the decision close to the close ``horizon`` trading days later are r (adjusted closes):

    gross  = sum_j w_j r_j                               dollars earned by $1 allocated as w
    cost   = 2 * cost_bps / 10_000 * sum_j |w_j|         opening and closing every position
    net    = gross - cost
    simple reward = net - bench                          bench = 0, or with
                                                         benchmark=equal_weight the mean of r
                                                         (buy and hold for one ticker)
    log reward    = log(1 + net) - log(1 + bench)        (1 + net floored at 1e-6)

An invalid answer earns ``invalid_penalty``. Worked example (tests/test_answers.py): the
answer "A=0.7, B=0.3" with r = (+4.0%, -2.0%), 10 bps a side, benchmark equal_weight:
gross = 0.7 * 0.04 + 0.3 * -0.02 = $0.0220, cost = 2 * 0.001 * 1.0 = $0.0020, net = $0.0200,
bench = (0.04 - 0.02) / 2 = $0.0100, reward = $0.0100; as log, log(1.02) - log(1.01) = 0.00985.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import ascii_uppercase

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

WORDS = {"long": 1.0, "flat": 0.0, "short": -1.0}
# The grammar as pattern text shared by Python's re (parse, one answer) and Arrow's RE2
# (score_many, a whole column). Both see the same ASCII classes: RE2 has no Unicode \s or
# \d and no lookahead, so the end of an action is a lookahead in re and consumed in RE2.
_WS = r"[ \t\n\r\f\v]"
_SEP = r"[ \t\n\r\f\v.,:;!)\-]"
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_ALLOC_TEXT = rf"[A-Za-z]{_WS}*={_WS}*{_NUMBER}(?:(?:{_WS}*,{_WS}*|{_WS}+)[A-Za-z]{_WS}*={_WS}*{_NUMBER})*"
_RANKING_TEXT = rf"[A-Za-z](?:{_WS}*>{_WS}*[A-Za-z])+"
# a weight ends where a word would: a stop after it only with a space or the end after that,
# so noise that starts "1.st" is not a weight of 1 (a stop then letters is no sentence end)
_NUMBER_SEP = rf"(?:$|[ \t\n\r\f\v,:;!)\-]|\.(?:$|{_WS}))"
_LABELLED_RE2 = rf"^{_WS}*(?P<act>{_ALLOC_TEXT}|{_RANKING_TEXT}|[A-Za-z])(?:$|{_SEP})"
_ELEMENT_RE2 = rf"^{_WS}*(?:(?P<act>(?i:long|flat|short))(?:$|{_SEP})|(?P<num>{_NUMBER}){_NUMBER_SEP})"
_END = rf"(?=$|{_SEP})"
_ELEMENT = re.compile(rf"{_WS}*(?:((?i:long|flat|short)){_END}|({_NUMBER})(?={_NUMBER_SEP}))")
_ALLOC = re.compile(rf"{_WS}*({_ALLOC_TEXT}){_END}")
_PAIR = re.compile(rf"([A-Za-z]){_WS}*={_WS}*({_NUMBER})")
_RANKING = re.compile(rf"{_WS}*({_RANKING_TEXT}){_END}")
_LABEL = re.compile(rf"{_WS}*([A-Za-z]){_END}")


@dataclass(frozen=True)
class Action:
    """A parsed answer: valid with ``weights`` per state ticker (and the ``ranking`` of label
    indices, best first, when the answer ranked them), or invalid with a reason."""

    valid: bool
    action: str | None = None
    weights: tuple[float, ...] = ()
    invalid_reason: str | None = None
    ranking: tuple[int, ...] = ()


def labels(k: int) -> str:
    return ascii_uppercase[:k]


def _invalid(reason: str) -> Action:
    return Action(False, invalid_reason=reason)


def _parse_element(text: str) -> Action:
    m = _ELEMENT.match(text)
    if not m:
        return _invalid("not_an_action")
    if m.group(1):
        word = m.group(1).lower()
        return Action(True, word, (WORDS[word],))
    w = float(m.group(2))
    if not -1.0 <= w <= 1.0:
        return _invalid("bad_weights")
    return Action(True, f"{w:+.2f}", (w,))


def _parse_labelled(text: str, k: int) -> Action:
    names = labels(k)

    def index(letter: str) -> int | None:
        i = names.find(letter.upper())
        return i if i >= 0 else None

    if m := _ALLOC.match(text):
        pairs = _PAIR.findall(m.group(1))
        weights = [0.0] * k
        seen = set()
        for letter, num in pairs:
            i = index(letter)
            if i is None:
                return _invalid("unknown_label")
            w = float(num)
            if i in seen or not 0.0 <= w <= 1.0:
                return _invalid("bad_weights")
            seen.add(i)
            weights[i] = w
        if abs(sum(weights) - 1.0) > 0.01:
            return _invalid("bad_weights")
        text = ",".join(f"{names[i]}={weights[i]:.2f}" for i in range(k) if i in seen)
        return Action(True, text, tuple(weights))
    if m := _RANKING.match(text):
        order = [index(c) for c in re.findall(r"[A-Za-z]", m.group(1))]
        if None in order:
            return _invalid("unknown_label")
        if sorted(order) != list(range(k)):
            return _invalid("bad_ranking")
        weights = tuple(1.0 if i == order[0] else 0.0 for i in range(k))
        return Action(True, ">".join(names[i] for i in order), weights, ranking=tuple(order))
    if m := _LABEL.match(text):
        i = index(m.group(1))
        if i is None:
            return _invalid("unknown_label")
        return Action(True, names[i], tuple(1.0 if j == i else 0.0 for j in range(k)))
    return _invalid("not_an_action")


def parse(completion: str, fmt: str, k: int | None = None) -> Action:
    """Parse a completion for a state of format ``fmt`` with ``k`` tickers; never raises."""
    if not isinstance(completion, str) or not completion.strip():
        return _invalid("empty")
    if fmt == "elementwise":
        return _parse_element(completion)
    return _parse_labelled(completion, 2 if fmt == "pairwise" else int(k or 0))


def rewards(w: np.ndarray, fwd: np.ndarray, k: np.ndarray, valid: np.ndarray, reward_cfg: dict) -> np.ndarray:
    """The reward formula (see the module docstring) over rows: weights and forward returns
    (rows, max k) padded with zeros, k tickers per row, which rows are valid answers."""
    net = (w * fwd).sum(1) - 2 * reward_cfg["cost_bps"] / 10_000 * np.abs(w).sum(1)
    bench = fwd.sum(1) / k if reward_cfg["benchmark"] == "equal_weight" else np.zeros(len(w))
    if reward_cfg["returns"] == "log":
        net, bench = np.log(np.maximum(1 + net, 1e-6)), np.log(np.maximum(1 + bench, 1e-6))
    return np.where(valid, net - bench, float(reward_cfg["invalid_penalty"]))


def reward(action: Action, forward_returns, reward_cfg: dict) -> float:
    """Dollar reward of one answer given its tickers' forward returns."""
    r = np.asarray(forward_returns, dtype=float)[None]
    w = np.asarray(action.weights if action.valid else np.zeros(r.shape[1]), dtype=float)[None]
    return float(rewards(w, r, np.array([r.shape[1]]), np.array([action.valid]), reward_cfg)[0])


def score_many(completions, fmts: np.ndarray, fwd: np.ndarray, k: np.ndarray, reward_cfg: dict) -> pd.DataFrame:
    """parse and reward for a whole column at once, identical to them row by row (tested).

    ``fwd`` is (rows, max k) forward returns padded with zeros; ``k`` the tickers per row.
    RE2 (through Arrow) cuts each completion's action out of its rationale; each distinct
    (action, format, k) is parsed once; the rewards are array arithmetic.
    """
    text = pa.array(completions, type=pa.string())  # an Arrow-backed column converts without a copy
    n, width, fmts, k = len(text), fwd.shape[1], np.asarray(fmts), np.asarray(k)
    act = np.full(n, None, dtype=object)
    element = fmts == "elementwise"
    for mask, pattern in ((element, _ELEMENT_RE2), (~element, _LABELLED_RE2)):
        if mask.any():
            found = pc.extract_regex(text.filter(pa.array(mask)), pattern)
            got = pc.struct_field(found, "act")
            if pattern == _ELEMENT_RE2:  # a word in act, a weight in num: the other group is ""
                got = pc.if_else(pc.equal(got, ""), pc.struct_field(found, "num"), got)
            act[mask] = got.to_numpy(zero_copy_only=False)
    has = pd.notna(act)  # an action needs a character that is not whitespace: never blank
    blank = np.zeros(n, dtype=bool)
    blank[~has] = [not isinstance(c, str) or not c.strip() for c in text.filter(pa.array(~has)).to_pylist()]
    # one code per distinct (action, format, k): factorized apart and combined as integers
    act_code, _ = pd.factorize(act[has])
    fmt_code, _ = pd.factorize(fmts[has])
    combined = (act_code * (fmt_code.max(initial=0) + 1) + fmt_code) * (k.max(initial=0) + 1) + k[has]
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    codes = np.full(n, len(first))  # not an action
    codes[has] = inverse
    codes[blank] = len(first) + 1
    rows = np.flatnonzero(has)[first]
    parsed = [parse(act[i], fmts[i], k[i]) for i in rows]
    table = [*parsed, Action(False, invalid_reason="not_an_action"), Action(False, invalid_reason="empty")]
    weights = np.zeros((len(table), width))
    for i, a in enumerate(table):
        weights[i, : len(a.weights)] = a.weights
    valid = np.array([a.valid for a in table])[codes]
    w = weights[codes]
    kept = np.where(valid, k, 0)
    flat = w[np.arange(width) < kept[:, None]]
    offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int32)
    return pd.DataFrame(
        {
            "action": np.array([a.action for a in table], dtype=object)[codes],
            "weights": pd.Series(
                pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=pa.float64())),
                dtype=pd.ArrowDtype(pa.list_(pa.float64())),
            ),
            "valid": valid,
            "invalid_reason": np.array([a.invalid_reason for a in table], dtype=object)[codes],
            "ranking": pd.Series(
                pa.array([a.ranking for a in table], pa.list_(pa.int64())).take(codes),
                dtype=pd.ArrowDtype(pa.list_(pa.int64())),
            ),
            "reward": rewards(w, fwd, k, valid, reward_cfg),
        }
    )
