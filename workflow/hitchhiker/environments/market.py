"""The market environment: states from real prices, a strict answer grammar, dollar rewards.

State: for one decision date T (a trading day) and one or two tickers, the last ``window``
daily returns of each ticker up to and including T. Nothing after T reaches the prompt.
Outcome: each ticker's simple return from the close of T to the close of T + horizon.

Answer grammar (one for all formats; case-insensitive, surrounding whitespace ignored):

    completion := ACTION [ SEP rationale ]
    ACTION     := "A" | "B"                    (pairwise)
                | "long" | "flat" | "short"    (elementwise)
    SEP        := whitespace | one of . , : ; ! ) -

The first word must be the action; anything else is invalid with a reason (``empty``,
``not_an_action``). Reward of a valid answer: the dollar profit of investing $1 as the
answer says over the horizon: pairwise A -> r_A, B -> r_B; elementwise long -> r,
flat -> 0, short -> -r. Invalid answers earn ``reward.invalid_penalty``.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hitchhiker import config
from hitchhiker.cli import HitchhikerError

LETTERS = "AB"
ACTIONS = {"pairwise": ("A", "B"), "elementwise": ("long", "flat", "short")}
_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")

TEMPLATE = {
    "pairwise": (
        "Daily returns in percent, oldest first, up to today's close.\n"
        "{rows}\n"
        "Which of A and B will return more over the next {horizon} trading days? "
        "Answer with A or B as the first word, then one short reason."
    ),
    "elementwise": (
        "Daily returns in percent, oldest first, up to today's close.\n"
        "{rows}\n"
        "Over the next {horizon} trading days, should we be long, flat or short {ticker}? "
        "Answer with long, flat or short as the first word, then one short reason."
    ),
}


@dataclass(frozen=True)
class Action:
    """A parsed answer: ``valid`` with ``weights`` per state ticker, or invalid with a reason."""

    valid: bool
    action: str | None = None
    weights: tuple[float, ...] = ()
    invalid_reason: str | None = None


def render(fmt: str, tickers: list[str], returns: np.ndarray, horizon: int) -> str:
    """The user message of a state; ``returns`` is (tickers, days) in fractions."""
    labels = LETTERS if fmt == "pairwise" else [""]
    rows = []
    for label, ticker, rets in zip(labels, tickers, returns, strict=True):
        name = f"{label} ({ticker})" if label else ticker
        rows.append(f"{name}: " + " ".join(f"{100 * r:+.2f}" for r in rets))
    return TEMPLATE[fmt].format(rows="\n".join(rows), horizon=horizon, ticker=tickers[0])


def parse(completion: str, fmt: str) -> Action:
    """Parse a completion against the grammar; never raises."""
    if not completion or not completion.strip():
        return Action(False, invalid_reason="empty")
    m = _FIRST_WORD.match(completion)
    word = m.group(1).lower() if m else None
    allowed = ACTIONS[fmt]
    for i, a in enumerate(allowed):
        if word == a.lower():
            if fmt == "pairwise":
                weights = tuple(1.0 if j == i else 0.0 for j in range(2))
            else:
                weights = ({"long": 1.0, "flat": 0.0, "short": -1.0}[a],)
            return Action(True, a, weights)
    return Action(False, invalid_reason="not_an_action")


def reward(action: Action, forward_returns, invalid_penalty: float) -> float:
    """Dollar profit of $1 allocated by ``action.weights`` over the horizon."""
    if not action.valid:
        return float(invalid_penalty)
    return float(np.dot(action.weights, forward_returns))


def shown_returns(prompt: str, n_tickers: int) -> list[np.ndarray]:
    """The daily returns (in percent) a prompt shows for each of its tickers, as rendered."""
    rows = prompt.splitlines()[1 : 1 + n_tickers]
    return [np.array([float(x) for x in row.split(":", 1)[1].split()]) for row in rows]


def state_id(fmt: str, date: pd.Timestamp, horizon: int, tickers: list[str], prompt: str) -> str:
    key = "\x1f".join([fmt, str(date.date()), str(horizon), ",".join(tickers), prompt])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class Market:
    """Environment interface: make_states, parse, reward (see environments/__init__.py)."""

    name = "market"

    def prices_for_states(self, prices: pd.DataFrame, cfg: dict) -> pd.DataFrame:
        """Wide close table (dates x tickers) the states are built from."""
        wide = prices.pivot(index="date", columns="ticker", values="close").sort_index()
        wide = wide[cfg["data"]["tickers"]].dropna()
        if len(wide) < cfg["states"]["window"] + cfg["states"]["horizon"] + 2:
            raise HitchhikerError(
                f"only {len(wide)} trading days where every ticker has a price: too few for "
                f"states.window + states.horizon"
            )
        return wide

    def make_states(self, prices: pd.DataFrame, cfg: dict, n_tokens) -> tuple[pd.DataFrame, pd.DataFrame]:
        """States and outcomes for every split and format.

        ``n_tokens(text)`` counts the chat-templated prompt's tokens with the policy tokenizer.
        """
        wide = self.prices_for_states(prices, cfg)
        st = cfg["states"]
        h, window = st["horizon"], st["window"]
        closes = wide.to_numpy()
        rets = closes[1:] / closes[:-1] - 1.0  # rets[i-1] is the return into day i
        dates = wide.index
        last = len(dates) - 1 - h  # the outcome of day i needs day i + h
        eligible = np.arange(window, last + 1)

        def in_window(split):
            lo, hi = pd.Timestamp(st[split]["start"]), pd.Timestamp(st[split]["end"])
            idx = eligible[(dates[eligible] >= lo) & (dates[eligible] <= hi)]
            return idx[:: st["stride"]]

        test_idx = in_window("test")
        if len(test_idx) == 0:
            raise HitchhikerError(
                f"config key states.test: no trading day in {st['test']['start']} .. "
                f"{st['test']['end']} with {window} days of history and {h} days of outcome"
            )
        train_idx = in_window("train")
        train_idx = train_idx[train_idx + config.embargo(st) <= test_idx[0]]
        if len(train_idx) == 0:
            raise HitchhikerError(
                f"config key states.train: no decision date in {st['train']['start']} .. "
                f"{st['train']['end']} with history and an embargo before the test window"
            )

        rng = np.random.default_rng(cfg.get("seed", 0))
        tickers = list(wide.columns)
        states, outcomes = [], []
        for split, idx in (("train", train_idx), ("test", test_idx)):
            for fmt in st["formats"]:
                if fmt == "pairwise":
                    groups = list(itertools.combinations(range(len(tickers)), 2))
                else:
                    groups = [(j,) for j in range(len(tickers))]
                # every (date, unordered ticker set) at most once: draw without replacement
                cells = [(i, g) for i in idx for g in groups]
                take = rng.permutation(len(cells))[: st[split]["max_states"]]
                for k in sorted(take):
                    i, g = cells[k]
                    order = list(g) if fmt == "elementwise" or rng.random() < 0.5 else list(g)[::-1]
                    names = [tickers[j] for j in order]
                    history = rets[i - window : i, order].T  # returns into days i-window+1 .. i
                    kept = window
                    prompt = render(fmt, names, history, h)
                    while n_tokens(prompt) > st["max_prompt_tokens"]:
                        kept -= 1
                        if kept < 2:
                            raise HitchhikerError(
                                f"config key states.max_prompt_tokens = {st['max_prompt_tokens']}: "
                                f"a {fmt} prompt with 2 days of history does not fit"
                            )
                        prompt = render(fmt, names, history[:, window - kept :], h)
                    fwd = closes[i + h, order] / closes[i, order] - 1.0
                    sid = state_id(fmt, dates[i], h, names, prompt)
                    states.append(
                        dict(
                            state_id=sid,
                            split=split,
                            format=fmt,
                            date=dates[i],
                            horizon=h,
                            tickers=names,
                            prompt=prompt,
                            history_days=kept,
                            prompt_tokens=n_tokens(prompt),
                        )
                    )
                    outcomes.append(
                        dict(
                            state_id=sid,
                            split=split,
                            format=fmt,
                            outcome_date=dates[i + h],
                            tickers=names,
                            forward_returns=[float(x) for x in fwd],
                        )
                    )
        return pd.DataFrame(states), pd.DataFrame(outcomes)

    def audit(self, prices: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, cfg: dict) -> dict:
        """Re-derive every state from the prices up to its decision date; raise on the first violation.

        Checks that each prompt's history equals the returns into the ``history_days`` trading
        days ending at the decision date T (so nothing after T is shown), that each outcome is
        the return from T to T + horizon, and that every train outcome ends before the first
        test decision date with at least the embargo between the splits.
        """
        wide = self.prices_for_states(prices, cfg)
        dates, closes = wide.index, wide.to_numpy()
        pos = {d: i for i, d in enumerate(dates)}
        col = {t: j for j, t in enumerate(wide.columns)}
        h = cfg["states"]["horizon"]
        out = outcomes.set_index("state_id")
        for s in states.itertuples():
            where = f"state {s.state_id} ({s.format} {', '.join(s.tickers)} on {s.date.date()})"
            i = pos.get(s.date)
            if i is None:
                raise HitchhikerError(f"leakage audit: {where}: decision date is not a trading day of the prices")
            for shown, ticker in zip(shown_returns(s.prompt, len(s.tickers)), s.tickers, strict=True):
                c = closes[i - len(shown) : i + 1, col[ticker]]
                if len(shown) != s.history_days or not np.allclose(shown, 100 * (c[1:] / c[:-1] - 1), atol=0.0051):
                    raise HitchhikerError(
                        f"leakage audit: {where}: the {ticker} history in the prompt is not the "
                        f"{s.history_days} daily returns ending at the decision date"
                    )
            o = out.loc[s.state_id]
            fwd = closes[i + h, [col[t] for t in s.tickers]] / closes[i, [col[t] for t in s.tickers]] - 1
            if o.outcome_date != dates[i + h] or not np.allclose(o.forward_returns, fwd):
                raise HitchhikerError(f"leakage audit: {where}: outcome is not the return over the next {h} days")
        train, test = states[states.split == "train"], states[states.split == "test"]
        gap = pos[test.date.min()] - pos[train.date.max()]
        last_train_outcome = out.loc[train.state_id, "outcome_date"].max()
        if gap < config.embargo(cfg["states"]) or last_train_outcome > test.date.min():
            raise HitchhikerError(
                f"leakage audit: train outcomes reach {last_train_outcome.date()}, the test window starts "
                f"{test.date.min().date()} ({gap} trading days apart, embargo {config.embargo(cfg['states'])})"
            )
        return {
            "states_checked": len(states),
            "train_dates": [str(train.date.min().date()), str(train.date.max().date())],
            "test_dates": [str(test.date.min().date()), str(test.date.max().date())],
            "last_train_outcome": str(last_train_outcome.date()),
            "embargo_trading_days": int(gap),
        }

    def baselines(self, states: pd.DataFrame) -> dict[str, list[tuple[float, ...]]]:
        """Weights of simple rules on the same states, from the history each prompt shows.

        random: the expected weights of a uniformly random valid answer (A/B half each;
        long/flat/short average to 0). always_first: always A, or always long (buy and
        hold). equal_weight: half in each of A and B, or long. momentum: the ticker with the
        higher summed shown return, or long if that sum is positive and short otherwise.
        mean_reversion: the opposite of momentum.
        """
        out: dict[str, list[tuple[float, ...]]] = {
            k: [] for k in ("random", "always_first", "equal_weight", "momentum", "mean_reversion")
        }
        for fmt, prompt, tickers in zip(states["format"], states["prompt"], states["tickers"], strict=True):
            shown = [h.sum() for h in shown_returns(prompt, len(tickers))]
            if fmt == "pairwise":
                mom = (1.0, 0.0) if shown[0] >= shown[1] else (0.0, 1.0)
                rows = {
                    "random": (0.5, 0.5),
                    "always_first": (1.0, 0.0),
                    "equal_weight": (0.5, 0.5),
                    "momentum": mom,
                    "mean_reversion": mom[::-1],
                }
            else:
                sign = 1.0 if shown[0] > 0 else -1.0
                rows = {
                    "random": (0.0,),
                    "always_first": (1.0,),
                    "equal_weight": (1.0,),
                    "momentum": (sign,),
                    "mean_reversion": (-sign,),
                }
            for k, w in rows.items():
                out[k].append(w)
        return out

    parse = staticmethod(parse)
    reward = staticmethod(reward)
