"""Baselines of the market environments: simple rules on the same states, rewarded exactly
as the policy (costs, benchmark, log or simple returns).

They read each state's structured ``shown_returns`` (the returns its prompt shows, as
rounded there), never the prompt text. A prompt showing only volume shows no return: its
momentum and mean reversion read a sum of 0 (A, or short for one ticker).
  random          the expected weights of a uniformly random valid choice: 1/k on each
                  ticker, or 0 for one ticker (long, flat and short average to 0)
  always_first    always A, or always long (buy and hold)
  equal_weight    1/k on each ticker, or long
  momentum        all on the ticker with the highest summed shown return; for one ticker,
                  long if that sum is positive, else short
  mean_reversion  all on the lowest, or the opposite of momentum
  higher_<name>   with market.data.signals, for each of market.states.signals: all on the ticker whose
                  value (as shown) is highest, the first of a tie; for one ticker, long if
                  the value is positive, else short
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker.environments.market import answers, lists
from hitchhiker.environments.market.states import SIGNAL_PREFIX


def weights(states: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each baseline's weights per state, (states, max k) padded with zeros: random,
    always_first, equal_weight, momentum, mean_reversion, then a higher_<name> per signal."""
    arr = pa.array(states["shown_returns"].map(lambda t: [list(x) for x in t]))
    per_ticker = pc.list_flatten(arr)  # one list of shown returns per (state, ticker)
    lengths = pc.list_value_length(per_ticker).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(per_ticker).to_numpy(zero_copy_only=False)
    sums = np.bincount(np.repeat(np.arange(len(lengths)), lengths), weights=values, minlength=len(lengths))
    k = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
    width = int(k.max(initial=1))
    total = np.full((len(states), width), np.nan)
    total[np.arange(width) < k[:, None]] = sums
    one = k == 1
    rows = np.arange(len(states))
    real = np.arange(width) < k[:, None]
    even = np.where(real, 1.0 / k[:, None], 0.0)
    first = np.zeros((len(states), width))
    first[:, 0] = 1.0

    def pick(many: np.ndarray, one_ticker) -> np.ndarray:  # the rule for k tickers, or for one
        alone = np.zeros_like(first)
        alone[:, 0] = one_ticker
        return np.where(one[:, None], alone, many)

    def highest(score: np.ndarray, lowest: bool = False) -> np.ndarray:  # all on the highest (lowest) score
        top = np.zeros_like(first)
        top[
            rows, (np.argmin if lowest else np.argmax)(np.where(real, score, np.inf if lowest else -np.inf), axis=1)
        ] = 1
        sign = np.where(score[:, 0] > 0, 1.0, -1.0)  # one ticker: long if positive (the opposite, for lowest)
        return pick(top, -sign if lowest else sign)

    out = {
        "random": pick(even, 0.0),
        "always_first": first,
        "equal_weight": pick(even, 1.0),
        "momentum": highest(total),
        "mean_reversion": highest(total, lowest=True),
    }
    for column in (c for c in states.columns if c.startswith(SIGNAL_PREFIX)):
        out[f"higher_{column.removeprefix(SIGNAL_PREFIX)}"] = highest(lists.padded(states[column], width, np.nan))
    return out


def rewards(states: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict) -> pd.DataFrame:
    """One row per (baseline, state), baselines in :func:`weights` order, states in the given order:
    baseline, state_id, date, reward."""
    fwd_col = outcomes.set_index("state_id").loc[states["state_id"], "forward_returns"].reset_index(drop=True)
    w = weights(states)
    width = next(iter(w.values())).shape[1]
    fwd = lists.padded(fwd_col, width, 0.0)
    k = lists.lengths(fwd_col)
    valid = np.ones(len(states), bool)
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "baseline": name,
                    "state_id": states["state_id"].to_numpy(),
                    "date": states["date"].to_numpy(),
                    "reward": answers.rewards(w[name], fwd, k, valid, reward_cfg),
                }
            )
            for name in w
        ],
        ignore_index=True,
    )
