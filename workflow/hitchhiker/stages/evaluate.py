"""evaluate: one policy on the held-out test states, greedy and sampled.

Every policy (round 0 = the base model, then each round's) answers the same test states:
one greedy completion and evaluate.samples_per_state sampled ones at the rollout
temperature centre (the base: evaluate.base_samples_per_state where set). Each answer is
parsed and rewarded exactly as in training.

Metrics, per decoding mode (an episode of a multi-turn environment is one answer):
  valid_rate      share of answers that parse; invalid_reasons counts the rest by reason
  hallucination   per kind, the share of answers with at least one claim of that kind the
                  prompt does not support (the environment's claim_rates; for the market:
                  unsupported_claim_rate, a return in percent, unshown_figure_rate,
                  wrong_arithmetic_rate, wrong_label_rate, unshown_day_rate,
                  unknown_ticker_rate), any_rate for any of them, unsupported_per_answer;
                  and whether a fall is only writing less: stating_figures_rate (answers
                  that state any figure), supported_per_answer, completion_chars
  mean_reward     mean reward per answer (the market's: dollars), invalid answers at the penalty
  hit_rate, median_reward; where the environment's decisions are positions (the market's),
  Sharpe and maximum drawdown of the portfolio they induce, an invalid answer's capital
  in cash (hitchhiker/metrics.py has the definitions); accuracy where the environment's
  score says whether an answer was right (``correct``)
  and the environment's own (answer_metrics): for the market, accuracy's n, rank_ic and
  brier with a calibration table; for the sequential portfolio, episode return, turnover
  and drawdown.
``n`` gives the answers behind each figure. Intervals are 95%, from a block bootstrap over
decision dates (states on the same date share a market, and overlapping horizons share
days, so they are resampled together), widened for the few blocks it rests on:
hitchhiker/metrics.py.

Usage:
  python -m hitchhiker.stages.evaluate --config config.yaml --round 1 --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet --policy results/default/policy/round_1 \\
      --predictions results/default/eval/round_1/predictions.parquet --metrics results/default/eval/round_1/metrics.json
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, environments, frequency, policy, rationales
from hitchhiker.metrics import block_bootstrap_ci, block_length, decision_stats
from hitchhiker.stages import rollout

SECTIONS = ["run", "seed", "environment", "states", "model", "rollout", "reward", "evaluate"]


def held_out_states(states: pd.DataFrame, split: str, max_states: int, seed: int) -> pd.DataFrame:
    """The evaluated states: a seeded draw from the held-out split, the same for every policy."""
    part = states[states["split"] == split].sort_values(["date", "state_id"]).reset_index(drop=True)
    pick = np.sort(np.random.default_rng(seed).permutation(len(part))[:max_states])
    return part.iloc[pick].reset_index(drop=True)


def metrics(preds: pd.DataFrame, env, states_cfg: dict, seed: int, per_year: int = 252) -> dict:
    h, stride = states_cfg["horizon"], states_cfg["stride"]
    block = block_length(h, stride)
    out = {}
    for mode, part in preds.groupby("mode"):
        m = decision_stats(part, h, stride, seed, per_year, env.positions)
        m["states"] = int(part.state_id.nunique())
        m["invalid_reasons"] = part.invalid_reason.dropna().value_counts().to_dict()
        m["n_valid"] = int(part.valid.sum())
        m["hallucination"] = {
            "answers_with_claims": int((part.claims > 0).sum()),
            "claims": int(part.claims.sum()),
        }
        for key, col in env.claim_rates(part).items():
            mean, lo, hi = block_bootstrap_ci(col, part.date, block, seed)
            m["hallucination"][key] = {"mean": mean, "ci95": [lo, hi]}
        m["reasons"] = rationales.summary(part.completion)
        for key, col in rationales.indicators(part).items():
            mean, lo, hi = block_bootstrap_ci(col, part.date, block, seed)
            m["reasons"][key] = {"mean": mean, "ci95": [lo, hi]}
        m |= env.answer_metrics(part, block, seed)
        out[mode] = m
    return out


def with_changed(preds, answers, changed, outcomes, env, reward_cfg) -> pd.DataFrame:
    """``preds`` with each answer's counterpart on the changed prompt beside it (the same
    state, mode and sample): changed_completion, and follows (the environment's, 1.0 where
    the decision moved as a reader's would)."""
    scored = pd.concat([answers, env.score(answers, changed, outcomes, reward_cfg)], axis=1)
    key = ["state_id", "mode", "sample_idx"]
    scored = scored.set_index(key).reindex(pd.MultiIndex.from_frame(preds[key]))
    scored.index = preds.index
    follows = env.follows(preds, scored.assign(state_id=preds["state_id"]), changed)
    return preds.assign(changed_completion=scored["completion"].astype("string"), follows=follows.astype(float))


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
    # summarize pairs each round with round 0 by the round recorded here: a policy evaluated
    # under another round's number would be reported as that round's
    policy.require_round(args.policy, args.round, f"--round {args.round} evaluates")
    ev, seed = cfg["evaluate"], cfg["seed"]
    states = held_out_states(artifacts.read_parquet(args.states, artifacts.STATES), ev["split"], ev["max_states"], seed)
    if states.empty:
        raise cli.HitchhikerError(f"{args.states} holds no {ev['split']} states")
    outcomes = artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES)
    env = environments.get(cfg["environment"])
    changed = env.counterfactual(states, cfg)
    # each state twice, greedy (one answer) then sampled, and so its changed copy where the
    # environment makes one: one model load, or one vLLM engine
    asked = [states] if changed is None else [states, changed]
    temps = np.concatenate([np.repeat([0.0, cfg["rollout"]["temperature"]], len(s)) for s in asked])
    every = pd.concat([s for s in asked for _ in range(2)], ignore_index=True)
    desc = f"evaluate round {args.round}"
    n = (args.round == 0 and ev["base_samples_per_state"]) or ev["samples_per_state"]
    preds = rollout.sample(every, args.policy, cfg, temps, n, seed, desc)
    preds.insert(1, "mode", np.where(preds["temperature"] == 0, "greedy", "sampled"))
    is_changed = preds.pop("prompt_index").to_numpy() >= 2 * len(states)
    preds, answers = preds[~is_changed].reset_index(drop=True), preds[is_changed].reset_index(drop=True)
    preds = pd.concat(
        [preds, environments.check_scored(env, env.score(preds, states, outcomes, cfg["reward"]), preds)], axis=1
    )
    if changed is not None:
        preds = with_changed(preds, answers, changed, outcomes, env, cfg["reward"])
    preds = preds.merge(states[["state_id", "date", "format", *env.state_columns]], on="state_id")
    preds = preds.merge(outcomes[["state_id", *env.outcome_columns]], on="state_id")
    preds.insert(0, "round", args.round)
    preds = preds.drop(columns=["prompt_ids", "completion_ids", "logprobs"])
    freq = frequency.of_outcomes(
        states.date, states.merge(outcomes, on="state_id").outcome_date, states.horizon.iloc[0]
    )
    result = {
        "round": args.round,
        "policy": args.policy,
        **metrics(preds, env, cfg["states"], seed, frequency.per_year(freq)),
    }
    artifacts.write_parquet(preds, args.predictions)
    artifacts.write_json(result, args.metrics)
    g = result["greedy"]
    print(
        f"evaluate: round {args.round} greedy valid {g['valid_rate']['mean']:.1%} "
        f"mean reward {g['mean_reward']['mean']:+.4f} -> {args.metrics}{cli.device_note()}"
    )


if __name__ == "__main__":
    cli.run(main)
