"""evaluate: one policy on the held-out test states, greedy and sampled.

Every policy (round 0 = the base model, then each round's) answers the same test states:
one greedy completion and evaluate.samples_per_state sampled ones at the rollout
temperature centre. Each answer is parsed and rewarded exactly as in training.

Metrics, per decoding mode:
  valid_rate      share of answers that parse; invalid_reasons counts the rest by reason
  hallucination   per kind, the share of answers with at least one claim of that kind the
                  prompt does not support: unsupported_claim_rate (a return in percent),
                  unshown_figure_rate, wrong_arithmetic_rate, wrong_label_rate,
                  unshown_day_rate, unknown_ticker_rate; any_rate for any of them, and
                  unsupported_per_answer, their mean count (hitchhiker/hallucination.py)
  accuracy        among valid multi-ticker answers, the share whose top weight went to the
                  ticker with the highest realised return; among valid elementwise answers
                  with a position, the share whose sign matched the return's (flat excluded)
  rank_ic         Spearman correlation of the answer's preference with realised returns
  mean_reward     mean dollar reward per decision, invalid answers at the penalty
  hit_rate, median_reward, Sharpe and maximum drawdown of the portfolio the decisions
  induce, brier (with a calibration table) for the answers' weights read as probabilities
  (hitchhiker/metrics.py has the definitions).
``n`` gives the answers behind each figure. Intervals are 95%, from a block bootstrap over
decision dates (states on the same date share a market, and overlapping horizons share
days, so they are resampled together).

Usage:
  python -m hitchhiker.evaluate --config config.yaml --round 1 --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet --policy results/default/policy/round_1 \\
      --predictions results/default/eval/round_1/predictions.parquet --metrics results/default/eval/round_1/metrics.json
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, frequency, hallucination, rollout, score
from hitchhiker.metrics import block_bootstrap_ci, block_length, brier, calibration, decision_stats, rank_ic

SECTIONS = ["run", "seed", "environment", "states", "model", "rollout", "reward", "evaluate"]


def held_out_states(states: pd.DataFrame, split: str, max_states: int, seed: int) -> pd.DataFrame:
    """The evaluated states: a seeded draw from the held-out split, the same for every policy."""
    part = states[states["split"] == split].sort_values(["date", "state_id"]).reset_index(drop=True)
    pick = np.sort(np.random.default_rng(seed).permutation(len(part))[:max_states])
    return part.iloc[pick].reset_index(drop=True)


def correct(preds: pd.DataFrame, outcomes: pd.DataFrame) -> pd.Series:
    """1.0 if a valid answer is right, 0.0 if wrong, NaN if invalid, flat or split evenly at the top."""
    fwd = outcomes.set_index("state_id")["forward_returns"]
    out = []
    for sid, valid, w in zip(preds.state_id, preds.valid, preds.weights, strict=True):
        r = np.asarray(fwd[sid])
        w = np.asarray(w)
        if not valid or not np.any(w) or (len(w) > 1 and (w == w.max()).sum() > 1):
            out.append(np.nan)  # no direction, or no single top pick
        elif len(r) == 1:
            out.append(float(np.sign(w[0]) == np.sign(r[0])))
        else:
            out.append(float(r[np.argmax(w)] >= r.max()))
    return pd.Series(out, index=preds.index)


def preference(preds: pd.DataFrame) -> list[list[float]]:
    """What each answer prefers, per ticker: its weights, or for a ranking k - rank."""
    out = []
    for ranking, w in zip(preds.ranking, preds.weights, strict=True):
        ranking = list(ranking)
        out.append([float(len(ranking) - ranking.index(j)) for j in range(len(ranking))] if ranking else list(w))
    return out


def metrics(preds: pd.DataFrame, states_cfg: dict, seed: int, per_year: int = 252) -> dict:
    h, stride = states_cfg["horizon"], states_cfg["stride"]
    block = block_length(h, stride)
    out = {}
    for mode, part in preds.groupby("mode"):
        m = decision_stats(part, h, stride, seed, per_year)
        m["states"] = int(part.state_id.nunique())
        m["invalid_reasons"] = part.invalid_reason.dropna().value_counts().to_dict()
        m["n_valid"] = int(part.valid.sum())
        m["n_accuracy"] = int(part.correct.notna().sum())
        m["hallucination"] = {
            "answers_with_claims": int((part.claims > 0).sum()),
            "claims": int(part.claims.sum()),
        }
        for key, col in hallucination.indicators(part).items():
            mean, lo, hi = block_bootstrap_ci(col, part.date, block, seed)
            m["hallucination"][key] = {"mean": mean, "ci95": [lo, hi]}
        for key, series in (("rank_ic", rank_ic(part)), ("brier", brier(part))):
            mean, lo, hi = block_bootstrap_ci(series.to_numpy(), series.index.to_numpy(), block, seed)
            m[key] = {"mean": mean, "ci95": [lo, hi], "n": len(series)}
        m["calibration"] = calibration(part)
        out[mode] = m
    return out


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--round", type=int, required=True, help="0 for the base policy")
    p.add_argument("--states", required=True)
    p.add_argument("--outcomes", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--predictions", required=True, help="Parquet to write")
    p.add_argument("--metrics", required=True, help="JSON to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    ev, seed = cfg["evaluate"], cfg["seed"]
    states = held_out_states(artifacts.read_parquet(args.states, artifacts.STATES), ev["split"], ev["max_states"], seed)
    if states.empty:
        raise cli.HitchhikerError(f"{args.states} holds no {ev['split']} states")
    outcomes = artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES)
    # each state twice, greedy (one answer) then sampled: one model load, or one vLLM engine
    temps = np.repeat([0.0, cfg["rollout"]["temperature"]], len(states))
    both = pd.concat([states, states], ignore_index=True)
    preds = rollout.sample(both, args.policy, cfg, temps, ev["samples_per_state"], seed, f"evaluate round {args.round}")
    preds.insert(1, "mode", np.where(preds["temperature"] == 0, "greedy", "sampled"))
    preds = pd.concat([preds, score.score_frame(preds, outcomes, cfg)], axis=1)
    preds["correct"] = correct(preds, outcomes)
    preds = preds.merge(states[["state_id", "date", "format", "tickers", "prompt"]], on="state_id")
    preds = preds.merge(outcomes[["state_id", "forward_returns"]], on="state_id")
    preds["preference"] = preference(preds)
    checks = [
        hallucination.check(c, p, t) for c, p, t in zip(preds.completion, preds.prompt, preds.tickers, strict=True)
    ]
    preds[list(hallucination.Claims._fields)] = pd.DataFrame(checks, index=preds.index)
    preds.insert(0, "round", args.round)
    preds = preds.drop(columns=["prompt_ids", "completion_ids", "logprobs", "prompt"])
    freq = frequency.of_outcomes(
        states.date, states.merge(outcomes, on="state_id").outcome_date, states.horizon.iloc[0]
    )
    result = {
        "round": args.round,
        "policy": args.policy,
        **metrics(preds, cfg["states"], seed, frequency.per_year(freq)),
    }
    artifacts.write_parquet(preds, args.predictions)
    artifacts.write_json(result, args.metrics)
    g = result["greedy"]
    print(
        f"evaluate: round {args.round} greedy valid {g['valid_rate']['mean']:.1%} "
        f"mean reward {g['mean_reward']['mean']:+.4f} -> {args.metrics}"
    )


if __name__ == "__main__":
    cli.run(main)
