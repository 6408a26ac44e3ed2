"""score: parse each completion, compute its dollar reward, and add the round to the
DuckDB replay buffer.

The buffer of round r is a copy of round r-1's with round r's rows added, so every
round's buffer is an immutable artifact and the file accumulates across rounds. Tables
(keys in brackets; re-scoring a round replaces its rows):
  states    [run, state_id]                   the train and test states
  outcomes  [run, state_id]                   realised forward returns per ticker
  prompts   [run, round, state_id]             the prompt token ids the round's policy saw
  rollouts  [run, round, state_id, sample_idx] completions, their token ids, behaviour logprobs
  scores    [run, round, state_id, sample_idx] action, weights, valid, invalid_reason, ranking,
                                               market_reward, unsupported_claims, reward

reward, what GRPO trains on, is the market reward less reward.unsupported_claim_penalty for
each claim of the completion that its prompt does not support (hitchhiker/hallucination.py;
counted always, charged only when the penalty is set).

Usage:
  python -m hitchhiker.score --config config.yaml --round 1 \\
      --rollouts results/default/rollouts/round_1.parquet --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet --prompts results/default/rollouts/round_1.prompts.parquet \\
      [--previous <buffer of round r-1>] \\
      --out results/default/buffer/round_1.duckdb
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, hallucination
from hitchhiker.environments import answers

SECTIONS = ["run", "environment", "reward"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS states (run VARCHAR, state_id VARCHAR, split VARCHAR, format VARCHAR,
  date TIMESTAMP, horizon INTEGER, tickers VARCHAR[], prompt VARCHAR, history_days INTEGER,
  PRIMARY KEY (run, state_id));
CREATE TABLE IF NOT EXISTS outcomes (run VARCHAR, state_id VARCHAR, split VARCHAR, format VARCHAR,
  outcome_date TIMESTAMP, tickers VARCHAR[], forward_returns DOUBLE[], PRIMARY KEY (run, state_id));
CREATE TABLE IF NOT EXISTS prompts (run VARCHAR, round INTEGER, state_id VARCHAR, prompt_ids INTEGER[],
  PRIMARY KEY (run, round, state_id));
CREATE TABLE IF NOT EXISTS rollouts (run VARCHAR, round INTEGER, state_id VARCHAR, sample_idx INTEGER,
  temperature DOUBLE, completion_ids INTEGER[], logprobs DOUBLE[],
  finish VARCHAR, completion VARCHAR, policy VARCHAR, backend VARCHAR, PRIMARY KEY (run, round, state_id, sample_idx));
CREATE TABLE IF NOT EXISTS scores (run VARCHAR, round INTEGER, state_id VARCHAR, sample_idx INTEGER,
  action VARCHAR, weights DOUBLE[], valid BOOLEAN, invalid_reason VARCHAR, ranking INTEGER[],
  market_reward DOUBLE, unsupported_claims INTEGER, reward DOUBLE, PRIMARY KEY (run, round, state_id, sample_idx));
"""


def score_frame(samples: pd.DataFrame, outcomes: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """action, weights, valid, invalid_reason, ranking, reward for each sample row (never raises)."""
    out = outcomes.set_index("state_id")
    pos = out.index.get_indexer(samples["state_id"])
    k_state = np.fromiter(map(len, out["forward_returns"]), np.int64, len(out))
    fwd_state = np.zeros((len(out), max(1, k_state.max(initial=1))))
    fwd_state[np.arange(fwd_state.shape[1]) < k_state[:, None]] = np.concatenate(
        [np.asarray(r, dtype=float) for r in out["forward_returns"]]
    )
    frame = answers.score_many(
        samples["completion"], out["format"].to_numpy()[pos], fwd_state[pos], k_state[pos], cfg["reward"]
    )
    return frame.set_axis(samples.index)


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--rollouts", required=True)
    p.add_argument("--states", required=True)
    p.add_argument("--outcomes", required=True)
    p.add_argument("--prompts", required=True, help="the rollout's prompt token ids, one row per state")
    p.add_argument("--previous", help="buffer of round r-1 (omit for round 1)")
    p.add_argument("--out", required=True, help="DuckDB file to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    run = cfg["run"]
    if args.previous and not Path(args.previous).is_file():
        raise cli.HitchhikerError(f"previous replay buffer {args.previous} does not exist")
    rollouts = artifacts.read_table(args.rollouts, artifacts.ROLLOUTS)  # Arrow: token lists go to DuckDB as-is
    keys = rollouts.select(["round", "state_id", "sample_idx", "completion"]).to_pandas()
    if set(keys["round"]) != {args.round}:
        raise cli.HitchhikerError(
            f"{args.rollouts} holds rounds {sorted(set(keys['round']))}, not --round {args.round}"
        )
    states, outcomes = (
        artifacts.read_table(args.states, artifacts.STATES),
        artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES),
    )
    prompts = artifacts.read_table(args.prompts, artifacts.PROMPTS)
    unprompted = set(keys["state_id"].unique()) - set(prompts["state_id"].to_pylist())
    if unprompted:
        raise cli.HitchhikerError(f"{args.rollouts}: state {min(unprompted)} has no prompt ids in {args.prompts}")
    missing = set(keys["state_id"].unique()) - set(outcomes["state_id"])
    if missing:
        raise cli.HitchhikerError(f"{args.rollouts}: state {min(missing)} has no outcome in {args.outcomes}")
    scores = pd.concat([keys.drop(columns="completion"), score_frame(keys, outcomes, cfg)], axis=1)
    shown = states.select(["state_id", "prompt", "tickers"]).to_pandas().set_index("state_id")
    seen = shown.loc[keys["state_id"]]
    scores["unsupported_claims"] = [
        hallucination.count(c, p, t)
        for c, p, t in zip(keys["completion"], seen["prompt"], seen["tickers"], strict=True)
    ]
    scores["market_reward"] = scores["reward"]
    scores["reward"] = (
        scores["market_reward"] - cfg["reward"]["unsupported_claim_penalty"] * scores["unsupported_claims"]
    )

    with artifacts.atomic_path(args.out) as tmp:
        if args.previous:
            shutil.copyfile(args.previous, tmp)
        with duckdb.connect(str(tmp)) as con:
            con.execute(SCHEMA)
            con.execute("BEGIN TRANSACTION")
            # table names are our constants; values always travel as parameters or registered frames
            con.register("states_in", states)
            con.register("outcomes_in", outcomes)
            con.register("rollouts_in", rollouts)
            con.register("prompts_in", prompts)
            con.register("scores_in", scores)
            for name in ("states", "outcomes"):
                con.execute(f"DELETE FROM {name} WHERE run = ?", [run])
                con.execute(f"INSERT INTO {name} BY NAME SELECT ?::VARCHAR AS run, * FROM {name}_in", [run])
            for name in ("prompts", "rollouts", "scores"):
                con.execute(f"DELETE FROM {name} WHERE run = ? AND round = ?", [run, args.round])
            for name in ("prompts", "rollouts", "scores"):
                con.execute(f"INSERT INTO {name} BY NAME SELECT ?::VARCHAR AS run, * FROM {name}_in", [run])
            con.execute("COMMIT")
            valid, mean, claims = con.execute(
                "SELECT avg(valid::INT), avg(reward), avg(unsupported_claims) FROM scores WHERE run = ? AND round = ?",
                [run, args.round],
            ).fetchone()
    print(
        f"score: round {args.round}, {len(scores)} samples, valid {valid:.1%}, mean reward {mean:+.4f}, "
        f"unsupported claims per sample {claims:.2f} -> {args.out}"
    )


if __name__ == "__main__":
    cli.run(main)
