"""score: the environment scores each completion (its action, its dollar reward, the claims
its rationale makes that the state does not support); the round goes into the replay buffer
(hitchhiker/buffer.py).

The stored reward, what the objectives train on, is the environment's reward
(``environment_reward``) less grounding.unsupported_claim_penalty for each unsupported claim,
plus grounding.reason_bonus where the reason argues for the answer from what the prompt
supports, scaled down by how many of the round's answers give the same reason
(rationales.paid): the grounding reward. score and grpo_train (where rollout.each_answer
weighs each reason by its grounding terms over reason_bonus) are the stages that read the
grounding section.

Usage:
  python -m hitchhiker.stages.score --config config.yaml --round 1 \\
      --rollouts results/default/rollouts/round_1.parquet --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet --prompts results/default/rollouts/round_1.prompts.parquet \\
      [--previous <buffer of round r-1>] \\
      --out results/default/buffer/round_1.duckdb
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# neither imports pandas nor pyarrow: see main
from hitchhiker import buffer, cli, config

SECTIONS = ["run", "environment", "reward", "grounding"]


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
    given = config.read(args.config)
    with buffer.write(args.out, args.previous, str(given.get("run")), args.round) as round_rows:
        # The token lists, most of the buffer's bytes, go from their files into DuckDB as they
        # are, on its threads, while the environment, pandas and pyarrow load here (validating
        # the config loads the environment): at 100k rollouts the loading takes longer than
        # the scoring (benchmarks/score). An input or a config found bad below leaves no
        # buffer behind, and a valid config names this run (run is required, no default).
        round_rows.insert({"rollouts": Path(args.rollouts), "prompts": Path(args.prompts)})
        cfg = config.validate(given, set(SECTIONS))
        import pyarrow as pa
        import pyarrow.compute as pc

        from hitchhiker import artifacts, environments, rewards

        keys = artifacts.read_table(
            args.rollouts, artifacts.ROLLOUTS, ["round", "state_id", "sample_idx", "completion", "answers"]
        ).to_pandas(types_mapper=_arrow_lists)  # each row's answers a list of str, Arrow-backed
        if set(keys["round"]) != {args.round}:
            raise cli.HitchhikerError(
                f"{args.rollouts} holds rounds {sorted(set(keys['round']))}, not --round {args.round}"
            )
        drawn = pa.array(keys["state_id"].unique())
        drawn_ids = set(drawn.to_pylist())
        # only the states this round drew from (a few thousand of a split's many): to pandas and into the buffer
        states = artifacts.read_table(args.states, artifacts.STATES).filter(pc.is_in(pc.field("state_id"), drawn))
        outcomes = artifacts.read_table(args.outcomes, artifacts.OUTCOMES).filter(pc.is_in(pc.field("state_id"), drawn))
        prompted = artifacts.read_table(args.prompts, artifacts.PROMPTS, ["state_id"])
        for table, what, path in ((states, "no state", args.states), (outcomes, "no outcome", args.outcomes),
                                  (prompted, "no prompt ids", args.prompts)):  # fmt: skip
            missing = drawn_ids - set(table["state_id"].to_pylist())
            if missing:
                raise cli.HitchhikerError(f"{args.rollouts}: state {min(missing)} has {what} in {path}")
        round_rows.insert({"states": states, "outcomes": outcomes})
        env = environments.get(cfg["environment"])
        scores = rewards.grounded(env, keys, states.to_pandas(), outcomes.to_pandas(), cfg)
        round_rows.insert({"scores": scores})
    print(
        f"score: round {args.round}, {len(keys)} samples, valid {scores['valid'].mean():.1%}, "
        f"mean reward {scores['reward'].mean():+.4f}, "
        f"unsupported claims per sample {scores['unsupported_claims'].mean():.2f} -> {args.out}"
    )


def _arrow_lists(arrow_type):
    """pandas' dtype for an Arrow list column: kept in Arrow (NumPy's, an array object per
    row, costs 0.03 s of the 100k-rollout benchmark's second); None for the default."""
    import pandas as pd
    import pyarrow as pa

    return pd.ArrowDtype(arrow_type) if pa.types.is_list(arrow_type) else None


if __name__ == "__main__":
    cli.run(main)
    # Skip the interpreter's teardown, which frees pandas', pyarrow's and DuckDB's modules
    # one by one: 0.07-0.09 s of the 100k-rollout benchmark's second. Safe here: the buffer
    # is closed and in place, the thread pools are shut down, and nothing else is open.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
