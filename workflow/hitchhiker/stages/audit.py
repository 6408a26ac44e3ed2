"""audit: the leakage audit that every run passes before any rollout.

The environment re-derives every state from the data up to its decision date (for the
market: prices, and market.data.news when set) and checks that the prompt is exactly the one that
data gives, that the outcome is what followed (the market's: the return over the horizon),
and that the splits (train, validation, test) are separated by the embargo. A violation fails the run with one line
naming the offending state.

Usage:
  python -m hitchhiker.stages.audit --config config.yaml --data results/default/prices.parquet \\
      --states results/default/states.parquet --outcomes results/default/outcomes.parquet \\
      --out results/default/audit.json
"""

from __future__ import annotations

from hitchhiker import artifacts, cli, config, environments, frequency

SECTIONS = ["run", "seed", "environment", "states"]


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--data", required=True, help="the data step's table (for the market, prices.parquet)")
    p.add_argument("--states", required=True)
    p.add_argument("--outcomes", required=True)
    p.add_argument("--out", required=True, help="JSON report to write (only when the audit passes)")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    env = environments.get(cfg["environment"])
    report = env.audit(
        artifacts.read_parquet(args.data, list(env.data_columns)),
        artifacts.read_parquet(args.states, artifacts.STATES),
        artifacts.read_parquet(args.outcomes, artifacts.OUTCOMES),
        cfg,
    )
    artifacts.write_json(report, args.out)
    unit = f"{report['period']}s" if "period" in report else frequency.periods(report["frequency"], 2)[2:]
    gaps = ", ".join(f"{k} {v['embargo_periods']}" for k, v in report.items() if "_to_" in k)
    if "not_audited" in report:  # an environment whose data the audit cannot read says so
        cli.console(f"audit: {report['states_checked']} states; not audited: {report['not_audited']} -> {args.out}")
        return
    cli.console(f"audit: {report['states_checked']} states clean; {unit} between splits: {gaps} -> {args.out}")


if __name__ == "__main__":
    cli.run(main)
