"""The market environments: decisions on a universe of tickers, paid by their realised returns.

``Market(name, closes)`` implements the Environment class (environments/base.py) from modules
that each hold one job: states.py (states and outcomes from a close table), prompts.py (the
text), answers.py (the grammar and the dollar reward), audit.py (the leakage audit),
baselines.py (simple rules on the same states), hallucination.py (claims a completion
makes that its prompt does not support). ``closes(prices, cfg)`` gives the close table
(dates x market.data.tickers) the states are built from: the fetched prices for ``market``, a
simulated path on their calendar for ``synthetic`` (synthetic.py). Nothing else differs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from hitchhiker import metrics
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.base import Environment
from hitchhiker.environments.market import answers, audit, baselines, headlines, lists, prompts, signals, states
from hitchhiker.environments.market import metrics as market_metrics

# the market section (market.data, market.states), shared by the three market environments
SCHEMA = yaml.safe_load(Path(__file__).with_name("config.schema.yaml").read_text())
# its keys as they were spelled while the shared schema held them (data.*, states.*)
MOVED = {
    f"{part}.{key}": f"market.{part}.{key}"
    for part in ("data", "states")
    for key in SCHEMA["properties"][part]["properties"]
}
FORMAT_SIZES = {"elementwise": 1, "pairwise": 2, "listwise": 4}  # the tiny model's practice prompts


def correct(weights: np.ndarray, valid: np.ndarray, fwd: np.ndarray, k: np.ndarray) -> np.ndarray:
    """1.0 if a valid answer is right, 0.0 if wrong, NaN if invalid, flat or split evenly at
    the top. Right: for several tickers, the top weight went to the one that returned the
    most; for one ticker, the position's sign is the return's. ``weights`` and ``fwd`` (the
    state's returns) are (answers, max k) padded with zeros, ``k`` the tickers per answer."""
    rows = np.arange(len(weights))
    real = np.arange(weights.shape[1]) < k[:, None]
    w = np.where(real, weights, -np.inf)
    top = np.argmax(w, axis=1)
    single_top = (w == w[rows, top][:, None]).sum(1) == 1
    decided = valid & (weights != 0).any(1) & ((k == 1) | single_top)
    right = np.where(
        k == 1, np.sign(weights[:, 0]) == np.sign(fwd[:, 0]), fwd[rows, top] >= np.where(real, fwd, -np.inf).max(1)
    )
    return np.where(decided, right.astype(float), np.nan)


def preference(rankings, weights) -> pd.Series:
    """What each answer prefers, per ticker: its weights, or for a ranking k - rank (the
    first of k tickers gets k). Array arithmetic on the flattened lists, no loop per answer."""
    rank = pa.array(rankings, pa.list_(pa.int64()))
    length = np.where((n_rank := lists.lengths(rank)) > 0, n_rank, n_weights := lists.lengths(weights))
    offset = np.concatenate([[0], np.cumsum(length)])
    out = np.empty(offset[-1])
    by_weights = np.repeat(n_rank == 0, n_weights)
    out[np.repeat(n_rank == 0, length)] = lists.flat(weights, 1)[by_weights]
    row = np.repeat(np.arange(len(rank)), n_rank)
    place = np.arange(len(row)) - np.repeat(np.cumsum(n_rank) - n_rank, n_rank)  # position in its ranking
    out[offset[row] + pc.list_flatten(rank).to_numpy(zero_copy_only=False)] = n_rank[row] - place
    arr = pa.ListArray.from_arrays(pa.array(offset.astype(np.int32)), pa.array(out))
    return pd.Series(arr, dtype=pd.ArrowDtype(arr.type))


def _swapped(prompt: str) -> str:
    """A pairwise prompt with A and B swapped: every "A (X): ..." line followed by a "B (Y): ..."
    line becomes "A (Y): ..." and "B (X): ..."."""
    lines = prompt.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].startswith("A (") and lines[i + 1].startswith("B ("):
            lines[i], lines[i + 1] = "A" + lines[i + 1][1:], "B" + lines[i][1:]
    return "\n".join(lines)


def discrete_actions(fmt: str, k: int) -> list[tuple[str, list[float]]]:
    """A format's discrete answers and their weights: long, flat, short for one ticker; each
    label for several (the $1 on that ticker)."""
    if fmt == "elementwise":
        return [(word, [w]) for word, w in answers.WORDS.items()]
    return [(label, np.eye(k)[j].tolist()) for j, label in enumerate(answers.labels(k))]


def real_closes(prices: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """The fetched closes, dates x market.data.tickers."""
    return states.wide(prices, cfg)


class PriceData(Environment):
    """What the market environments share besides their decisions: their data, a price table
    of market.data.tickers (environments/market/prices.py, imported by the methods that fetch_prices runs
    only), and the columns their metrics read."""

    data_name = "prices"
    config_schema = SCHEMA
    section = "market"
    moved = MOVED
    reward_unit = "$"
    positions = True
    data_columns = ("date", "ticker", "close")
    state_columns = ("tickers",)
    outcome_columns = ("forward_returns",)
    practice_reasons = ("because the recent returns are higher.", "because the recent returns are lower.")

    def state_files(self, cfg: dict) -> list[str]:
        data = cfg["market"]["data"]
        return [f for f in (data["news"], data["signals"]) if f]

    def tickers_per_state(self, cfg: dict) -> int:
        """The most tickers one state shows: fetch keeps at least this many when a fault
        policy drops some."""
        st = cfg["market"]["states"]
        return max(states.set_size(f, st) for f in st["formats"])

    def fetch(self, cfg: dict) -> tuple[pd.DataFrame, list[str]]:
        from hitchhiker.environments.market import prices  # here: the data step's only (sources.CALLED_BY)

        return prices.fetch(cfg, self.tickers_per_state(cfg))

    def data_files(self, cfg: dict) -> list[str]:
        from hitchhiker.environments.market import prices  # here: see fetch

        return prices.files(cfg["market"]["data"])

    def describe_data(self, cfg: dict) -> str:
        from hitchhiker.environments.market import prices  # here: see fetch

        return prices.source(cfg["market"]["data"])

    def preflight_data(self, cfg: dict) -> None:
        from hitchhiker.environments.market import prices  # here: see fetch

        prices.preflight(cfg, self)


def _rows(ids: pd.Series, of: pd.Series) -> np.ndarray:
    """Each id's row in ``of`` (ids without repeats), -1 where it has none: Arrow's hash
    lookup, where pandas' get_indexer first makes a Python string of every id (0.02 s a call
    at 100k samples, benchmarks/score)."""
    ids = pa.array(ids)
    return pc.index_in(ids, value_set=pa.array(of).cast(ids.type)).fill_null(-1).to_numpy()


class Market(PriceData):
    """Decisions among k tickers, paid by their returns; environments/base.py documents each method."""

    plots = ("equity_curves", "calibration")
    reads_reasons = True  # pairwise and elementwise answers (reasons.py)

    def __init__(self, name: str, closes: Callable[[pd.DataFrame, dict], pd.DataFrame] = real_closes):
        self.name = name
        self.closes = closes

    def describe_data(self, cfg: dict) -> str:
        simulated = "" if self.closes is real_closes else " (its calendar and tickers; the closes are simulated)"
        return super().describe_data(cfg) + simulated

    def check_config(self, cfg: dict) -> None:
        st, data = cfg["market"]["states"], cfg["market"]["data"]
        if st["turns"] != 1:
            raise HitchhikerError(
                f"config key market.states.turns = {st['turns']}: episodes of several turns are the sequential "
                f"environment's, not the {self.name} one's (one decision per state)"
            )
        if "pairwise" in st["formats"] and len(data.get("tickers", [None, None])) < 2:
            raise HitchhikerError("config key market.data.tickers: pairwise states need at least 2 tickers")
        if "listwise" in st["formats"] and "tickers" in data and len(data["tickers"]) < st["list_size"]:
            raise HitchhikerError(
                f"config key market.states.list_size = {st['list_size']}: more than the "
                f"{len(data['tickers'])} tickers in market.data.tickers"
            )
        if st["signals"] and not data["signals"]:
            raise HitchhikerError(
                "config key market.states.signals is set but market.data.signals is not: name the signal file"
            )
        if data["signals"] and not st["signals"]:  # every signal of the file, in its order
            st["signals"] = signals.names(data["signals"])
        if data["source"] == "file" and not data["path"]:
            raise HitchhikerError("config key market.data.path is required when market.data.source is file")
        if data["path"] and data["source"] != "file":  # else the run reads another source in silence
            raise HitchhikerError(
                f"config key market.data.path is set, but market.data.source is {data['source']}: set "
                "market.data.source: file to read it, or remove market.data.path"
            )

    def check_data(self, prices: pd.DataFrame, cfg: dict) -> None:
        states.check_features(prices, cfg)
        if cfg["market"]["data"]["signals"]:
            self._tables(prices, cfg)  # reads the signals and checks each is known on every decision date
        else:
            states.split_indices(self.closes(prices, cfg).index, cfg["states"])

    def _tables(self, prices: pd.DataFrame, cfg: dict) -> tuple[pd.DataFrame, np.ndarray | None, np.ndarray | None]:
        return states.tables(prices, cfg, self.closes)

    def make_states(
        self, prices: pd.DataFrame, cfg: dict, fits, news: pd.DataFrame | None = None
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``news``: the headline table, or None to read market.data.news (if set)."""
        return states.make_states(*self._tables(prices, cfg), cfg, fits, self._news(cfg) if news is None else news)

    def audit(
        self,
        prices: pd.DataFrame,
        states_: pd.DataFrame,
        outcomes: pd.DataFrame,
        cfg: dict,
        news: pd.DataFrame | None = None,
    ) -> dict:
        return audit.audit(
            *self._tables(prices, cfg), states_, outcomes, cfg, self._news(cfg) if news is None else news
        )

    @staticmethod
    def _news(cfg: dict) -> pd.DataFrame | None:
        news = cfg["market"]["data"]["news"]
        return headlines.read(news) if news else None

    def score(
        self, samples: pd.DataFrame, states_: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict
    ) -> pd.DataFrame:
        # here: code inputs of the stages that score (sources.CALLED_BY)
        from hitchhiker.environments.market import hallucination, reasons

        pos, at = _rows(samples["state_id"], outcomes["state_id"]), _rows(samples["state_id"], states_["state_id"])
        lacking = samples["state_id"][(pos < 0) | (at < 0)]  # score says which file lacks it, before this
        if len(lacking):
            raise HitchhikerError(f"state {lacking.iloc[0]} of a sample has no state or no outcome to score it by")
        k_state = lists.lengths(outcomes["forward_returns"])
        fwd_state = lists.padded(outcomes["forward_returns"], fill=0.0)
        frame = answers.score_many(
            samples["completion"], outcomes["format"].to_numpy()[pos], fwd_state[pos], k_state[pos], reward_cfg
        ).set_axis(samples.index)
        claims = hallucination.check_many(
            samples["completion"], states_["prompt"].to_numpy()[at], states_["tickers"].to_numpy()[at]
        )
        w = lists.padded(frame["weights"], fwd_state.shape[1], 0.0)  # k per valid answer, none per invalid
        frame["correct"] = correct(w, frame["valid"].to_numpy(), fwd_state[pos], k_state[pos])
        frame["preference"] = preference(frame["ranking"], frame["weights"])
        claims = hallucination.with_totals(claims.set_axis(samples.index))
        argued = reasons.check_many(
            samples["completion"].tolist(),
            states_["prompt"].to_numpy()[at],
            states_["tickers"].to_numpy()[at],
            frame["weights"].tolist(),
            frame["valid"].to_numpy(),
            outcomes["format"].to_numpy()[pos],
        ).set_axis(samples.index)
        # a reason with an unsupported claim (a figure not shown, ...) is not a supported one
        argued["reason_supported"] = argued["reason_supported"].mask(claims["unsupported_claims"] > 0, 0.0)
        return pd.concat([frame, claims, argued], axis=1)

    def counterfactual(self, states_: pd.DataFrame, cfg: dict) -> pd.DataFrame | None:
        """The pairwise states with A and B swapped: each section's and the signals' A line
        shows B's values under B's ticker, and B's A's (the tickers column reversed to match);
        a reader picks the same ticker, under the other label. Other formats: not changed."""
        pair = states_[states_["format"] == "pairwise"]
        if pair.empty:
            return None
        return pair.assign(
            prompt=[_swapped(p) for p in pair["prompt"]], tickers=[list(t)[::-1] for t in pair["tickers"]]
        )

    def follows(self, answered: pd.DataFrame, changed: pd.DataFrame, states_: pd.DataFrame) -> pd.Series:
        """1.0 where the changed answer favours the same ticker (the other label), 0.0 where
        not or where either favours none (equal weights); NaN where either is invalid."""

        def favoured(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
            """Each answer's favoured ticker (0, 1; -1 for none), and whether it is valid."""
            valid = frame["valid"].astype("boolean").fillna(False).to_numpy(dtype=bool)
            w = [list(x) if ok else [] for x, ok in zip(frame["weights"], valid, strict=True)]
            return np.array([-1 if len(x) != 2 or x[0] == x[1] else int(x[1] > x[0]) for x in w]), valid

        (before, ok_before), (after, ok_after) = favoured(answered), favoured(changed)
        same = (before >= 0) & (after == 1 - before)
        return pd.Series(np.where(ok_before & ok_after, same.astype(float), np.nan), index=answered.index)

    def action_rewards(self, outcomes: pd.DataFrame, reward_cfg: dict) -> pd.DataFrame:
        """Every discrete action of each state, priced as score prices its answer: one row per
        (state_id, action) with the action's answer text, its weights and its reward. Pairwise
        and listwise: each label (all of the $1 on that ticker); elementwise: long, flat and
        short. What a full-information objective trains on: the reward of every action, not
        only of those the policy happened to sample."""
        rows = [
            (sid, action, w, r)
            for sid, fmt, r in zip(outcomes["state_id"], outcomes["format"], outcomes["forward_returns"], strict=True)
            for action, w in discrete_actions(fmt, len(r))
        ]
        k = np.array([len(w) for _, _, w, _ in rows])
        weights, fwd = np.zeros((len(rows), max(k, default=1))), np.zeros((len(rows), max(k, default=1)))
        for i, (_, _, w, r) in enumerate(rows):
            weights[i, : len(w)], fwd[i, : len(w)] = w, r
        return pd.DataFrame(
            {
                "state_id": [r[0] for r in rows],
                "action": [r[1] for r in rows],
                "weights": [r[2] for r in rows],
                "reward": answers.rewards(weights, fwd, k, np.ones(len(rows), bool), reward_cfg),
            }
        )

    def answer_metrics(self, scored: pd.DataFrame, block: int, seed: int) -> dict:
        out: dict = {"n_accuracy": int(scored["correct"].notna().sum())}
        ic, brier = market_metrics.rank_ic(scored), market_metrics.brier(scored)
        for key, series, dates in (("rank_ic", ic, ic.index.get_level_values("date")), ("brier", brier, brier.index)):
            mean, lo, hi = metrics.block_bootstrap_ci(series.to_numpy(), dates.to_numpy(), block, seed)
            out[key] = {"mean": mean, "ci95": [lo, hi], "n": len(series)}
        out["calibration"] = market_metrics.calibration(scored)
        return out

    def paired_metrics(self, scored: pd.DataFrame, base: pd.DataFrame, horizon: int, stride: int, seed: int) -> dict:
        return {"rank_ic": market_metrics.paired_rank_ic(scored, base, horizon, stride, seed)}

    def claim_rates(self, scored: pd.DataFrame) -> pd.DataFrame:
        from hitchhiker.environments.market import hallucination  # here: see score

        return hallucination.indicators(scored)

    def baselines(self, states_: pd.DataFrame, outcomes: pd.DataFrame, reward_cfg: dict, train=None) -> pd.DataFrame:
        return baselines.rewards(states_, outcomes, reward_cfg)

    def draw_plots(self, preds: pd.DataFrame, rounds: list[dict], baselines: pd.DataFrame, cfg: dict) -> dict:
        from hitchhiker.environments.market import plots  # here: matplotlib, for summarize only (sources.CALLED_BY)

        h, stride = cfg["states"]["horizon"], cfg["states"]["stride"]
        return {
            "equity_curves": plots.equity_curves(preds, rounds, baselines, h, stride),
            "calibration": plots.calibration(rounds),
        }

    def corpus(self, cfg: dict, seed: int, n: int = 400) -> list[str]:
        tickers = _tickers(cfg)
        rng = np.random.default_rng(seed)
        texts = []
        for k in range(n):
            fmt = "pairwise" if k % 2 else "elementwise"
            names = list(rng.choice(tickers, size=2 if fmt == "pairwise" else 1))
            rets = rng.normal(0, 0.015, size=(len(names), 10))
            texts.append(prompts.render(fmt, names, rets, int(rng.integers(1, 21))))
            action = rng.choice(["long", "flat", "short"] if fmt == "elementwise" else ["A", "B"])
            texts.append(f"{action} because the recent returns are {rng.choice(['higher', 'lower'])}.")
        return texts

    def practice_turn(self, cfg: dict, rng: np.random.Generator, i: int) -> tuple[str, list[str]]:
        tickers = _tickers(cfg)
        sizes = {f: k for f, k in FORMAT_SIZES.items() if k <= len(tickers)}
        fmt = list(sizes)[i % len(sizes)]
        k = sizes[fmt]
        names = list(rng.choice(tickers, size=k, replace=False))
        rets = rng.normal(0, 0.01, size=(k, int(rng.integers(2, 11))))
        prompt = prompts.render(fmt, names, rets, int(rng.integers(1, 21)))
        return prompt, list(answers.WORDS) if fmt == "elementwise" else list(answers.labels(k))


ENVIRONMENT = Market("market")


def _tickers(cfg: dict) -> list[str]:
    """market.data.tickers, which the shared schema leaves optional (other environments have none):
    base_model's tiny corpus and practice turns read it before fetch_prices checks it."""
    from hitchhiker.environments.market import prices  # fetch_prices' module, imported where it is needed

    prices.required(cfg["market"]["data"])
    return cfg["market"]["data"]["tickers"]
