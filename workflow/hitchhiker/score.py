"""score: parse each completion, compute its dollar reward, and add the round to the
DuckDB replay buffer.

The buffer of round r is a copy of round r-1's with round r's rows added, so every
round's buffer is an immutable artifact and the file accumulates across rounds. Tables
(keys in brackets; re-scoring a round replaces its rows):
  states    [run, state_id]                   the train and test states
  outcomes  [run, state_id]                   realised forward returns per ticker
  rollouts  [run, round, state_id, sample_idx] completions, token ids, behaviour logprobs
  scores    [run, round, state_id, sample_idx] action, valid, invalid_reason, reward

Usage:
  python -m hitchhiker.score --config config.yaml --round 1 \\
      --rollouts results/default/rollouts/round_1.parquet --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet [--previous <buffer of round r-1>] \\
      --out results/default/buffer/round_1.duckdb
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pandas as pd

from hitchhiker import artifacts, cli, config, environments

SECTIONS = ["run", "environment", "reward"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS states (run VARCHAR, state_id VARCHAR, split VARCHAR, format VARCHAR,
  date TIMESTAMP, horizon INTEGER, tickers VARCHAR[], prompt VARCHAR, history_days INTEGER,
  prompt_tokens INTEGER, PRIMARY KEY (run, state_id));
CREATE TABLE IF NOT EXISTS outcomes (run VARCHAR, state_id VARCHAR, split VARCHAR, format VARCHAR,
  outcome_date TIMESTAMP, tickers VARCHAR[], forward_returns DOUBLE[], PRIMARY KEY (run, state_id));
CREATE TABLE IF NOT EXISTS rollouts (run VARCHAR, round INTEGER, state_id VARCHAR, sample_idx INTEGER,
  temperature DOUBLE, prompt_ids INTEGER[], completion_ids INTEGER[], logprobs DOUBLE[],
  finish VARCHAR, completion VARCHAR, policy VARCHAR, PRIMARY KEY (run, round, state_id, sample_idx));
CREATE TABLE IF NOT EXISTS scores (run VARCHAR, round INTEGER, state_id VARCHAR, sample_idx INTEGER,
  action VARCHAR, weights DOUBLE[], valid BOOLEAN, invalid_reason VARCHAR, reward DOUBLE,
  PRIMARY KEY (run, round, state_id, sample_idx));
"""


def score_frame(samples: pd.DataFrame, states: pd.DataFrame, outcomes: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """action, weights, valid, invalid_reason, reward for each sample row (never raises)."""
    # One parse per sample is inherent (the grammar is a regex per completion); it runs at
    # benchmarks/score's figures, far above what rollout produces.
    env = environments.get(cfg["environment"])
    fmt = states.set_index("state_id")["format"]
    fwd = outcomes.set_index("state_id")["forward_returns"]
    rows = []
    for sid, text in zip(samples["state_id"], samples["completion"], strict=True):
        r = fwd[sid]
        act = env.parse(text, fmt[sid], len(r))
        rows.append((act.action, list(act.weights), act.valid, act.invalid_reason, env.reward(act, r, cfg["reward"])))
    return pd.DataFrame(rows, index=samples.index, columns=["action", "weights", "valid", "invalid_reason", "reward"])


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--round", type=int, required=True)
    p.add_argument("--rollouts", required=True)
    p.add_argument("--states", required=True)
    p.add_argument("--outcomes", required=True)
    p.add_argument("--previous", help="buffer of round r-1 (omit for round 1)")
    p.add_argument("--out", required=True, help="DuckDB file to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    run = cfg["run"]
    if args.previous and not Path(args.previous).is_file():
        raise cli.HitchhikerError(f"previous replay buffer {args.previous} does not exist")
    rollouts = artifacts.read_parquet(args.rollouts, artifacts.ROLLOUTS)
    if set(rollouts["round"]) != {args.round}:
        raise cli.HitchhikerError(
            f"{args.rollouts} holds rounds {sorted(set(rollouts['round']))}, not --round {args.round}"
        )
    states, outcomes = (
        artifacts.read_parquet(args.states, artifacts.STATES),
        artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES),
    )
    missing = set(rollouts["state_id"]) - set(outcomes["state_id"])
    if missing:
        raise cli.HitchhikerError(f"{args.rollouts}: state {min(missing)} has no outcome in {args.outcomes}")
    scores = pd.concat(
        [rollouts[["round", "state_id", "sample_idx"]], score_frame(rollouts, states, outcomes, cfg)], axis=1
    )
    for df in (states, outcomes, rollouts, scores):
        df.insert(0, "run", run)

    with artifacts.atomic_path(args.out) as tmp:
        if args.previous:
            shutil.copyfile(args.previous, tmp)
        with duckdb.connect(str(tmp)) as con:
            con.execute(SCHEMA)
            con.execute("BEGIN TRANSACTION")
            # table names are our constants; values always travel as parameters or frames
            for name, df in (("states", states), ("outcomes", outcomes), ("rollouts", rollouts), ("scores", scores)):
                if name in ("states", "outcomes"):
                    con.execute(f"DELETE FROM {name} WHERE run = ?", [run])
                else:
                    con.execute(f"DELETE FROM {name} WHERE run = ? AND round = ?", [run, args.round])
                con.register("incoming", df)
                con.execute(f"INSERT INTO {name} BY NAME SELECT * FROM incoming")
                con.unregister("incoming")
            con.execute("COMMIT")
            valid, mean = con.execute(
                "SELECT avg(valid::INT), avg(reward) FROM scores WHERE run = ? AND round = ?", [run, args.round]
            ).fetchone()
    print(f"score: round {args.round}, {len(scores)} samples, valid {valid:.1%}, mean reward {mean:+.4f} -> {args.out}")


if __name__ == "__main__":
    cli.run(main)
