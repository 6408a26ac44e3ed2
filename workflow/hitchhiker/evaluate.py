"""evaluate: one policy on the held-out test states, greedy and sampled.

Every policy (round 0 = the base model, then each round's) answers the same test states:
one greedy completion and evaluate.samples_per_state sampled ones at the rollout
temperature centre. Each answer is parsed and rewarded exactly as in training.

Metrics, per decoding mode:
  valid_rate      share of answers that parse (the rest are "hallucinated" formats)
  accuracy        among valid pairwise answers, the share that picked the ticker with the
                  higher realised return; among valid long/short answers, the share whose
                  direction matched the realised return's sign (flat answers excluded)
  mean_reward     mean dollar reward per decision, invalid answers at the penalty
  hit_rate, median_reward, and the Sharpe and maximum drawdown of the portfolio the
  decisions induce (hitchhiker/metrics.py says how overlapping horizons are handled).
Intervals are 95%, from a block bootstrap over decision dates (states on the same date
share a market, and overlapping horizons share days, so they are resampled together).

Usage:
  python -m hitchhiker.evaluate --config config.yaml --round 1 --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet --policy results/default/policy/round_1 \\
      --predictions results/default/eval/round_1/predictions.parquet --metrics results/default/eval/round_1/metrics.json
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, rollout, score
from hitchhiker.metrics import decision_stats

SECTIONS = ["run", "seed", "environment", "states", "model", "rollout", "reward", "evaluate"]


def held_out_states(states: pd.DataFrame, split: str, max_states: int, seed: int) -> pd.DataFrame:
    """The evaluated states: a seeded draw from the held-out split, the same for every policy."""
    part = states[states["split"] == split].sort_values(["date", "state_id"]).reset_index(drop=True)
    pick = np.sort(np.random.default_rng(seed).permutation(len(part))[:max_states])
    return part.iloc[pick].reset_index(drop=True)


def correct(preds: pd.DataFrame, outcomes: pd.DataFrame) -> pd.Series:
    """1.0 if a valid answer is right, 0.0 if wrong, NaN if invalid or flat."""
    fwd = outcomes.set_index("state_id")["forward_returns"]
    out = []
    for sid, valid, w in zip(preds.state_id, preds.valid, preds.weights, strict=True):
        r = np.asarray(fwd[sid])
        w = np.asarray(w)
        if not valid or not np.any(w):
            out.append(np.nan)
        elif len(r) == 1:
            out.append(float(np.sign(w[0]) == np.sign(r[0])))
        else:
            out.append(float(r[np.argmax(w)] >= r.max()))
    return pd.Series(out, index=preds.index)


def metrics(preds: pd.DataFrame, states_cfg: dict, seed: int) -> dict:
    h, stride = states_cfg["horizon"], states_cfg["stride"]
    out = {}
    for mode, part in preds.groupby("mode"):
        m = decision_stats(part, h, stride, seed)
        m["states"] = int(part.state_id.nunique())
        m["invalid_reasons"] = part.invalid_reason.dropna().value_counts().to_dict()
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
    parts = []
    for mode, temp, n in (("greedy", 0.0, 1), ("sampled", cfg["rollout"]["temperature"], ev["samples_per_state"])):
        s = rollout.sample(
            states, args.policy, cfg, np.full(len(states), temp), n, seed, f"evaluate round {args.round} {mode}"
        )
        s.insert(1, "mode", mode)
        parts.append(s)
    preds = pd.concat(parts, ignore_index=True)
    preds = pd.concat([preds, score.score_frame(preds, outcomes, cfg)], axis=1)
    preds["correct"] = correct(preds, outcomes)
    preds = preds.merge(states[["state_id", "date", "format", "tickers"]], on="state_id")
    preds.insert(0, "round", args.round)
    preds = preds.drop(columns=["prompt_ids", "completion_ids", "logprobs"])
    result = {"round": args.round, "policy": args.policy, **metrics(preds, cfg["states"], seed)}
    artifacts.write_parquet(preds, args.predictions)
    artifacts.write_json(result, args.metrics)
    g = result["greedy"]
    print(
        f"evaluate: round {args.round} greedy valid {g['valid_rate']['mean']:.1%} "
        f"mean reward {g['mean_reward']['mean']:+.4f} -> {args.metrics}"
    )


if __name__ == "__main__":
    cli.run(main)
