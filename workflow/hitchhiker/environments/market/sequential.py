"""The sequential portfolio environment: episodes of K decisions whose compounded dollar
result is the reward.

An episode starts on a decision date T_0 with k tickers (pairwise: 2, listwise:
market.states.list_size; drawn as the market draws its sets, labelled A, B, ... in a random order)
and $1 in cash. Its turns are the decision dates T_t = T_0 + t * step, t = 0 .. K-1
(K = market.states.turns, step = states.horizon / K periods, so the episode spans states.horizon
periods and the splits' embargo covers it).
At turn 1 the model sees the market's history sections for the ``window`` periods ending at
T_0; at each later turn, the returns of the ``step`` periods since the last turn, in the
same form; at every turn its portfolio (value and current weights) and the question. It
answers new weights with the market's grammar (one letter, weights such as A=0.6, B=0.4,
or a ranking, which puts all on its first); an invalid answer holds the current weights.

Between turns the portfolio drifts with the prices; rebalancing from the drifted weights to
the answer costs reward.cost_bps per side on the dollars traded, as does buying at T_0
(from cash) and selling at the end, so turnover ties the turns together. Value:

    V_0 = 1;  V_t+1 = V_t (1 - c |w_t - d_t|_1) (1 + w_t . r_t);  V = V_K (1 - c |d_K|_1)

with c = cost_bps / 10_000, d_t the weights drifted to T_t (d_0 = 0, cash) and r_t the
tickers' simple returns from T_t to T_t+1. Reward: V - 1 - bench (bench = 0, or with
benchmark=equal_weight the equal-weight portfolio rebalanced each turn, without costs),
as log(V) - log(1 + bench) for returns=log, plus invalid_penalty x (invalid turns) / K.

No turn sees a price after its own date: a turn's message is rendered from the state's
turn_history and turn_returns, which hold only the periods up to that turn's date (the audit
re-derives them, and the first prompt, from the prices, and tests/test_properties.py
perturbs every later price and finds every earlier turn's message byte-identical).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from hitchhiker import frequency, metrics
from hitchhiker.cli import HitchhikerError
from hitchhiker.environments.market import answers, audit, lists, prompts, states
from hitchhiker.environments.market import environment as market

QUESTION = (
    "Turn {turn} of {turns}. Allocate the portfolio among {labels} for the next {step}: answer first with "
    "weights such as {example}, or one letter to put everything on it, then one short reason."
)


def _labels(k: int) -> str:
    letters = answers.labels(k)
    return ", ".join(letters[:-1]) + f" and {letters[-1]}"


def portfolio_line(value: float, weights: np.ndarray) -> str:
    held = [f"{label}={w:.2f}" for label, w in zip(answers.labels(len(weights)), weights, strict=True) if w > 0]
    return f"Portfolio: ${value:.4f}, " + (", ".join(held) if held else "all in cash") + "."


def question(turn: int, turns: int, k: int, step: int, freq: str) -> str:
    example = ", ".join(f"{label}={1 / k:.2f}".rstrip("0") for label in answers.labels(k))
    return QUESTION.format(
        turn=turn, turns=turns, labels=_labels(k), step=frequency.periods(freq, step), example=example
    )


def simulate(weights: np.ndarray, returns: np.ndarray, cost_bps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value paths of episodes: ``weights`` (episodes, turns, k) chosen at each turn (a row of
    NaN: hold the drifted weights), ``returns`` (episodes, turns, k) each period's simple
    returns. Returns the value before each turn's trade and at the end of the last period
    (episodes, turns + 1, before the final sale), the rebalancing turnover |w_t - d_t|_1 of each
    turn (episodes, turns) and the weights drifted to the end of the last period."""
    e, t_n, k = returns.shape
    c = cost_bps / 10_000
    value = np.ones((e, t_n + 1))
    traded = np.zeros((e, t_n))
    drift = np.zeros((e, k))
    for t in range(t_n):
        w = np.where(np.isnan(weights[:, t]), drift, weights[:, t])
        traded[:, t] = np.abs(w - drift).sum(1)
        growth = 1 + (w * returns[:, t]).sum(1)
        value[:, t + 1] = value[:, t] * (1 - c * traded[:, t]) * growth
        drift = np.divide(w * (1 + returns[:, t]), growth[:, None], out=np.zeros_like(w), where=growth[:, None] > 0)
    return value, traded, drift


def outcomes_of(weights: np.ndarray, returns: np.ndarray, invalid: np.ndarray, reward_cfg: dict) -> dict:
    """Per episode: reward (see the module docstring), episode_return (V - 1), turnover (the
    mean rebalancing turnover of turns 2 .. K; 0 for one turn) and drawdown (the largest fall
    of the value path from its running peak)."""
    turns = returns.shape[1]
    c = reward_cfg["cost_bps"] / 10_000
    value, traded, drift = simulate(weights, returns, reward_cfg["cost_bps"])
    final = value[:, -1] * (1 - c * np.abs(drift).sum(1))
    path = np.column_stack([value[:, :-1], final])
    drawdown = (1 - path / np.maximum.accumulate(path, axis=1)).max(1)
    bench = np.zeros(len(final))
    if reward_cfg["benchmark"] == "equal_weight":
        bench = np.prod(1 + returns.mean(2), axis=1) - 1
    if reward_cfg["returns"] == "log":
        earned = np.log(np.maximum(final, 1e-6)) - np.log(np.maximum(1 + bench, 1e-6))
    else:
        earned = final - 1 - bench
    return {
        "reward": earned + reward_cfg["invalid_penalty"] * invalid / turns,
        "episode_return": final - 1,
        "turnover": traded[:, 1:].mean(1) if turns > 1 else np.zeros(len(final)),
        "drawdown": drawdown,
    }


def _weights(answer: str, k: int) -> np.ndarray:
    """The weights an answer sets (NaN for an invalid one: hold)."""
    a = answers.parse(answer, "listwise", k)
    return np.asarray(a.weights, dtype=float) if a.valid else np.full(k, np.nan)


def first_prompts(names: np.ndarray, shown: dict[str, np.ndarray], turns: int, step: int, freq: str) -> pa.Array:
    """The first turn's user messages: the history sections, the portfolio in cash, the question."""
    k = names.shape[1]
    return prompts.cat(
        prompts.sections_batch(names, shown, freq), portfolio_line(1.0, np.zeros(k)), question(1, turns, k, step, freq),
        sep="\n",
    )  # fmt: skip


class Sequential(market.PriceData):
    """K-turn portfolio episodes; environments/base.py documents each method."""

    name = "sequential"
    plots = ("equity_curves",)  # no calibration: an episode's weights are not one forecast

    def check_config(self, cfg: dict) -> None:
        st, data = states.options(cfg), cfg["market"]["data"]
        if "horizon" in st and st["horizon"] % st["turns"]:
            raise HitchhikerError(
                f"config key market.states.turns = {st['turns']}: states.horizon = {st['horizon']} (the episode's "
                "length) must be a multiple of it, each turn holding horizon / turns periods"
            )
        if "elementwise" in st["formats"]:
            raise HitchhikerError(
                "config key market.states.formats: the sequential environment's episodes are pairwise or listwise, "
                "not elementwise"
            )
        market.ENVIRONMENT.check_config(
            {**cfg, "market": {**cfg["market"], "states": {**cfg["market"]["states"], "turns": 1}}}
        )
        if data["news"]:
            raise HitchhikerError("config key market.data.news: the sequential environment shows no headlines")
        if data["signals"]:
            raise HitchhikerError("config key market.data.signals: the sequential environment shows no signals")

    def check_data(self, prices: pd.DataFrame, cfg: dict) -> None:
        states.check_features(prices, cfg)
        states.split_indices(states.wide(prices, cfg).index, cfg["states"])

    @staticmethod
    def _tables(prices: pd.DataFrame, cfg: dict):
        return states.tables(prices, cfg, states.wide)

    def make_states(self, prices, cfg, fits):
        st = states.options(cfg)
        wide, volume, _ = self._tables(prices, cfg)
        dates, closes = wide.index, wide.to_numpy()
        freq = frequency.detect(dates)
        out_states, out_outcomes = [], []
        for split, fmt, days, order in states.draws(dates, closes.shape[1], st, cfg.get("seed", 0)):
            s, o = self._build(fmt, days, order, closes, volume, dates, wide.columns, st, freq)
            if not np.asarray(fits(pa.array(s["prompt"]), st["max_prompt_tokens"]), dtype=bool).all():
                raise HitchhikerError(
                    f"config key states.max_prompt_tokens = {st['max_prompt_tokens']}: a first turn with "
                    f"states.window = {st['window']} does not fit (episodes do not trim their history)"
                )
            s.insert(1, "split", split)
            o.insert(1, "split", split)
            out_states.append(s)
            out_outcomes.append(o)
        return pd.concat(out_states, ignore_index=True), pd.concat(out_outcomes, ignore_index=True)

    @staticmethod
    def episode_data(closes, volume, days, order, st):
        """Everything an episode's states and outcomes hold, from the closes: the first turn's
        sections; for each later turn its decision position, the daily returns since the last
        turn and that period's return (each up to its own date); the outcome of every period
        and of the whole episode."""
        turns = st["turns"]
        step = st["horizon"] // turns
        window = st["window"]
        shown = states.shown_sections(states.features(closes, volume, days, order, window, st["features"]), window)
        turn_days = days[:, None] + step * np.arange(turns)
        span = turn_days[:, 1:, None] + np.arange(-step, 1)  # (episodes, turns - 1, step + 1)
        c = closes[span[:, :, None, :], order[:, None, :, None]]  # (episodes, turns - 1, k, step + 1)
        history = c[..., 1:] / c[..., :-1] - 1
        turn_returns = c[..., -1] / c[..., 0] - 1
        period = (
            closes[(turn_days + step)[:, :, None], order[:, None, :]] / closes[turn_days[:, :, None], order[:, None, :]]
            - 1
        )
        total = closes[(days + st["horizon"])[:, None], order] / closes[days[:, None], order] - 1
        return shown, turn_days, history, turn_returns, period, total

    def _build(self, fmt, days, order, closes, volume, dates, columns, st, freq):
        names = np.asarray(columns)[order]
        turns = st["turns"]
        shown, turn_days, history, turn_returns, period, total = self.episode_data(closes, volume, days, order, st)
        text = first_prompts(names, shown, turns, st["horizon"] // turns, freq)
        ids = states.state_ids(fmt, dates[days], st["horizon"], names, text)
        tickers = lists.from_array(names.astype(str), pa.string())
        state_frame = pd.DataFrame(
            {
                "state_id": ids,
                "format": fmt,
                "date": dates[days],
                "horizon": st["horizon"],
                "tickers": tickers,
                "prompt": pd.Series(text, dtype=pd.ArrowDtype(pa.string())),
                "history_days": st["window"],
                "shown_returns": lists.from_array(states.shown_returns(shown)),
                "turns": turns,
                "frequency": freq,
                "turn_dates": list(dates[turn_days.ravel()].to_numpy().reshape(turn_days.shape)),
                "turn_history": lists.from_array(history),
                "turn_returns": lists.from_array(turn_returns),
            }
        )
        outcome_frame = pd.DataFrame(
            {
                "state_id": ids,
                "format": fmt,
                "outcome_date": dates[days + st["horizon"]],
                "tickers": tickers,
                "forward_returns": lists.from_array(total),
                "period_returns": lists.from_array(period),
            }
        )
        return state_frame, outcome_frame

    def audit(self, prices, states_, outcomes, cfg):
        """Re-derive every episode from the prices: its first prompt byte for byte, and for
        every later turn its date, the returns its message shows and the period return its
        portfolio line is computed from, each from prices up to that turn's date; then the
        outcomes (every period's and the whole episode's) and the embargo between splits."""
        st = states.options(cfg)
        wide, volume, _ = self._tables(prices, cfg)
        dates, closes = wide.index, wide.to_numpy()
        freq = frequency.detect(dates)
        turns, step = st["turns"], st["horizon"] // st["turns"]
        states_ = states_.reset_index(drop=True)
        pos = audit.decision_positions(states_, dates)

        def fail(row: int, what: str):
            audit.fail(states_, row, what)

        outside = (pos - st["window"] < 0) | (pos + st["horizon"] >= len(dates))
        if outside.any():
            fail(int(np.argmax(outside)), "history or episode outside the prices")
        if (states_["turns"] != turns).any():
            fail(
                int(np.argmax(states_["turns"] != turns)),
                f"an episode of other than market.states.turns = {turns} turns",
            )
        out = outcomes.set_index("state_id").reindex(states_["state_id"])
        if out["outcome_date"].isna().any():
            fail(int(np.argmax(out["outcome_date"].isna().to_numpy())), "no outcome")
        for _, group in states_.groupby("format", sort=False):
            rows = group.index.to_numpy()
            names = np.asarray([list(t) for t in group["tickers"]], dtype=object)
            cols = wide.columns.get_indexer(names.ravel()).reshape(names.shape)
            if (cols < 0).any():
                fail(int(rows[np.argmax((cols < 0).any(1))]), "a ticker that is not in the prices")
            shown, turn_days, history, turn_returns, period, total = self.episode_data(
                closes, volume, pos[rows], cols, st
            )
            expect = first_prompts(names, shown, turns, step, freq)
            same = pa.compute.fill_null(pa.compute.equal(expect, pa.array(group["prompt"], pa.string())), False)
            same = same.to_numpy(zero_copy_only=False)
            if not same.all():
                fail(
                    int(rows[np.argmin(same)]), "the first turn's prompt is not the one the prices up to its date give"
                )
            want_dates = dates[turn_days.ravel()].to_numpy().reshape(turn_days.shape)
            got_dates = np.asarray([pd.DatetimeIndex(d).to_numpy() for d in group["turn_dates"]])
            bad = (got_dates.shape != want_dates.shape) or (got_dates != want_dates).any(1)
            if np.any(bad):
                fail(int(rows[np.argmax(np.broadcast_to(bad, len(rows)))]),
                     f"its turns are not every {frequency.periods(freq, step)} from its date")  # fmt: skip
            for column, want in (("turn_history", history), ("turn_returns", turn_returns)):
                got = lists.nested(group[column], want.shape[1:])
                bad = ~np.isclose(got, want, rtol=0, atol=1e-12).reshape(len(rows), turns - 1, -1).all(2)
                if bad.any():
                    row, turn = np.argwhere(bad)[0]
                    fail(int(rows[row]), f"turn {turn + 2}'s {column} are not the {frequency.periods(freq, step)} "
                         f"ending at its date {dates[turn_days[row, turn + 1]].date()}")  # fmt: skip
            o = out.iloc[rows]
            k = names.shape[1]
            wrong = pd.DatetimeIndex(o["outcome_date"]).to_numpy() != dates[pos[rows] + st["horizon"]].to_numpy()
            wrong |= ~np.isclose(lists.nested(o["forward_returns"], (k,)), total).all(1)
            wrong |= ~np.isclose(lists.nested(o["period_returns"], (turns, k)), period).all((1, 2))
            if wrong.any():
                fail(
                    int(rows[np.argmax(wrong)]),
                    f"outcome is not the return over the next {frequency.periods(freq, st['horizon'])}",
                )
        return audit.splits_report(states_, out["outcome_date"], pos, freq, st)

    def next_turn(self, state, answers_so_far: list[str], reward_cfg: dict) -> str | None:
        turn, turns = len(answers_so_far), int(state["turns"])
        if turn >= turns:
            return None
        k = len(state["tickers"])
        step = int(state["horizon"]) // turns
        returns = lists.nested(pd.Series([state["turn_returns"]]), (turns - 1, k))[:, :turn]
        weights = np.asarray([_weights(a, k) for a in answers_so_far])[None]
        value, _, drift = simulate(weights, returns, reward_cfg["cost_bps"])
        history = lists.nested(pd.Series([state["turn_history"]]), (turns - 1, k, step))[:, turn - 1]
        freq = state["frequency"]
        sections = prompts.sections_batch(np.asarray([list(state["tickers"])]), {"returns": history}, freq)
        # before this turn's trade: the value reached, the weights drifted to it
        return "\n".join(
            [sections[0].as_py(), portfolio_line(value[0, turn], drift[0]), question(turn + 1, turns, k, step, freq)]
        )

    def _turn_prompts(self, state, said: list[str], reward_cfg: dict) -> list[str]:
        """The user message of each turn the episode played."""
        later = [self.next_turn(state, said[:t], reward_cfg) for t in range(1, min(len(said), int(state["turns"])))]
        return [state["prompt"], *later]

    def score(self, samples, states_, outcomes, reward_cfg):
        from hitchhiker.environments.market import (
            hallucination,  # here: a code input of the stages that score (sources.CALLED_BY)
        )

        seen = states_.set_index("state_id").loc[samples["state_id"]]
        out = outcomes.set_index("state_id").loc[samples["state_id"]]
        parts = []
        for k, rows in pd.Series(np.arange(len(samples))).groupby(seen["tickers"].map(len).to_numpy()):
            rows = rows.to_numpy()
            turns = int(seen["turns"].iloc[rows[0]])
            weights = np.full((len(rows), turns, k), np.nan)
            invalid = np.zeros(len(rows))
            reasons, actions = [], []
            said_turns = []  # (answer, its turn's prompt, tickers, row) of every turn: checked at once below
            for j, r in enumerate(rows):
                state, said = seen.iloc[r], [str(a) for a in samples["answers"].iloc[r]]
                parsed = [answers.parse(said[t] if t < len(said) else "", "listwise", k) for t in range(turns)]
                for t, a in enumerate(parsed):
                    if a.valid:
                        weights[j, t] = a.weights
                invalid[j] = sum(not a.valid for a in parsed)
                reasons.append(next((a.invalid_reason for a in parsed if not a.valid), None))
                actions.append(" | ".join(a.action if a.valid else "hold" for a in parsed))
                shown = self._turn_prompts(state, said, reward_cfg)
                said_turns += [(a, p, state["tickers"], j) for a, p in zip(said, shown, strict=False)]
            turns_ = pd.DataFrame(said_turns, columns=["answer", "prompt", "tickers", "row"])
            claims = hallucination.check_many(turns_["answer"], turns_["prompt"], turns_["tickers"])
            counts = claims.groupby(turns_["row"].to_numpy()).sum().reindex(range(len(rows)), fill_value=0)
            result = outcomes_of(
                weights, lists.nested(out["period_returns"].iloc[rows], (turns, k)), invalid, reward_cfg
            )
            frame = pd.DataFrame(
                {
                    "action": actions,
                    "valid": invalid == 0,
                    "invalid_reason": reasons,
                    "invalid_turns": invalid,
                    **result,
                }
            )
            parts.append(pd.concat([frame, counts], axis=1).set_axis(samples.index[rows]))
        return hallucination.with_totals(pd.concat(parts).loc[samples.index])

    def claim_rates(self, scored):
        from hitchhiker.environments.market import hallucination  # here: see score

        return hallucination.indicators(scored)

    def answer_metrics(self, scored, block, seed):
        out = {}
        for column in ("episode_return", "turnover", "drawdown", "invalid_turns"):
            mean, lo, hi = metrics.block_bootstrap_ci(scored[column], scored["date"], block, seed)
            out[column] = {"mean": mean, "ci95": [lo, hi]}
        return out

    def draw_plots(self, preds, rounds, baselines, cfg):
        from hitchhiker.environments.market import plots  # here: matplotlib, for summarize only (sources.CALLED_BY)

        st = cfg["states"]
        return {"equity_curves": plots.equity_curves(preds, rounds, baselines, st["horizon"], st["stride"])}

    def baselines(self, states_, outcomes, reward_cfg, train=None):
        """buy_and_hold: equal weights at the first turn, then held (drifting); equal_weight:
        rebalanced to equal weights each turn (paying the turnover); momentum: everything on
        the ticker whose shown returns (as the turn's message rounds them) sum highest."""
        out = outcomes.set_index("state_id").loc[states_["state_id"]]
        parts = []
        for k, rows in pd.Series(np.arange(len(states_))).groupby(states_["tickers"].map(len).to_numpy()):
            rows = rows.to_numpy()
            group = states_.iloc[rows]
            turns, n = int(group["turns"].iloc[0]), len(rows)
            step = int(group["horizon"].iloc[0]) // turns
            returns = lists.nested(out["period_returns"].iloc[rows], (turns, k))
            hold = np.full((n, turns, k), np.nan)
            hold[:, 0] = 1 / k
            first = lists.nested(group["shown_returns"].map(lambda t: [float(np.sum(x)) for x in t]), (k,))
            later = prompts.as_shown(100 * lists.nested(group["turn_history"], (turns - 1, k, step))).sum(3)
            momentum = np.eye(k)[np.argmax(np.concatenate([first[:, None], later], axis=1), axis=2)]
            for name, w in (
                ("buy_and_hold", hold),
                ("equal_weight", np.full((n, turns, k), 1 / k)),
                ("momentum", momentum),
            ):
                result = outcomes_of(w, returns, np.zeros(n), reward_cfg)
                parts.append(pd.DataFrame({"baseline": name, "state_id": group["state_id"].to_numpy(),
                                           "date": group["date"].to_numpy(), **result}))  # fmt: skip
        return pd.concat(parts, ignore_index=True)

    def corpus(self, cfg, seed):
        """The market's texts, and first and later turns of episodes on random data."""
        rng = np.random.default_rng(seed + 2)
        tickers = cfg["market"]["data"]["tickers"]
        texts = market.ENVIRONMENT.corpus(cfg, seed)
        for i in range(100):
            names = np.asarray([list(rng.choice(tickers, size=2, replace=False))])
            texts.append(self.practice_turn(cfg, rng, i)[0])
            rets = {"returns": rng.normal(0, 0.01, (1, 2, 5))}
            texts.append(prompts.sections_batch(names, rets, "daily")[0].as_py())
            texts.append(portfolio_line(float(rng.uniform(0.9, 1.1)), rng.dirichlet([1, 1])))
            texts.append(f"A={rng.uniform():.2f}, B={rng.uniform():.2f} because the recent returns are higher.")
        return texts

    def practice_turn(self, cfg, rng, i):
        k = 2
        names = np.asarray([list(rng.choice(cfg["market"]["data"]["tickers"], size=k, replace=False))])
        rets = {"returns": rng.normal(0, 0.01, size=(1, k, int(rng.integers(2, 11))))}
        turns = int(rng.integers(1, 5))
        prompt = first_prompts(names, rets, turns, int(rng.integers(1, 6)), "daily")[0].as_py()
        return prompt, list(answers.labels(k))


ENVIRONMENT = Sequential()
