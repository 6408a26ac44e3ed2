"""The synthetic environment: the market's prompts, grammar and rewards on simulated prices
with a planted, learnable signal.

Each ticker's daily return follows an AR(1) process, r_t = PHI * r_{t-1} + VOL * e_t, on the
calendar and tickers of the fetched prices. With PHI = 0.9 the expected return over the
next h days is PHI (1 - PHI^h) / (1 - PHI) times the last daily return, so the sign and size
of the last return in the prompt predict the outcome: a policy that reads its state can
earn well above zero, one that answers at random earns zero on average. It is what the
learning test trains on; nothing in rollout, training or the Snakefile changes to use it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker.environments.market import environment as market
from hitchhiker.environments.market import states

PHI = 0.9
VOL = 0.003


def simulated_closes(prices: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """An AR(1) path per ticker (seeded by the config's seed) on the fetched close table's calendar."""
    calendar = states.wide(prices, cfg)
    rng = np.random.default_rng(cfg.get("seed", 0) + 7919)
    shocks = rng.standard_normal(calendar.shape) * VOL
    rets = np.zeros_like(shocks)
    for t in range(1, len(rets)):
        rets[t] = PHI * rets[t - 1] + shocks[t]
    closes = 100.0 * np.exp(np.cumsum(np.log1p(np.clip(rets, -0.5, None)), axis=0))
    return pd.DataFrame(closes, index=calendar.index, columns=calendar.columns)


ENVIRONMENT = market.Market("synthetic", closes=simulated_closes)
