"""build_states: states (prompt side, nothing after the decision date) and outcomes
(realised forward returns), for the train and test splits, from the price table.

The environment (config key ``environment``) makes them; each prompt is capped at
states.max_prompt_tokens measured with the base policy's own tokenizer and chat template,
trimming the oldest history first.

Usage:
  python -m hitchhiker.build_states --config config.yaml --prices results/default/prices.parquet \\
      --policy results/default/policy/round_0 --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet
"""

from __future__ import annotations

from hitchhiker import artifacts, cli, config, environments, policy

SECTIONS = ["run", "seed", "environment", "data", "states", "model"]


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--prices", required=True)
    p.add_argument("--policy", required=True, help="base policy directory (for its tokenizer)")
    p.add_argument("--states", required=True, help="Parquet to write")
    p.add_argument("--outcomes", required=True, help="Parquet to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    tok = policy.load_tokenizer(args.policy, cfg["model"])
    prices = artifacts.read_parquet(args.prices, artifacts.PRICES)
    env = environments.get(cfg["environment"])
    states, outcomes = env.make_states(
        prices, cfg, lambda text: len(tok(policy.chat(tok, text), add_special_tokens=False).input_ids)
    )
    artifacts.write_parquet(outcomes, args.outcomes)
    artifacts.write_parquet(states, args.states)
    counts = states.groupby(["split", "format"]).size().to_dict()
    print(f"build_states: {len(states)} states {counts} -> {args.states}")


if __name__ == "__main__":
    cli.run(main)
