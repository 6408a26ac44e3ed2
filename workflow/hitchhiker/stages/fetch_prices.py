"""fetch_prices: the environment's data step. It writes the table the states are built from
to results/<run>/<data_name>.parquet: for the market, the tidy price table of the
configured universe (environments/market/prices.py has the sources and the fault treatment); for
another environment, whatever its ``fetch`` reads and checks (the weather environment: a
daily weather record). The name is the design card's.

Usage:
  python -m hitchhiker.stages.fetch_prices --config config.yaml --out results/default/prices.parquet
"""

from __future__ import annotations

from hitchhiker import artifacts, cli, config, environments

SECTIONS = ["run", "environment", "data", "states"]


def inputs(cfg: dict) -> list[str]:
    """The files the data step reads (the rule's inputs: editing one reruns it)."""
    return environments.get(cfg["environment"]).data_files(cfg)


def describe(cfg: dict) -> str:
    """Where the data comes from, in words (the console's first line)."""
    return environments.get(cfg["environment"]).describe_data(cfg)


def preflight(cfg: dict) -> None:
    """Read and check the data as the stages will, so that a bad file, key or date range
    stops the run in one line before any job starts (rules/common.smk)."""
    environments.get(cfg["environment"]).preflight_data(cfg)


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--out", required=True, help="Parquet file to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    table, notes = environments.get(cfg["environment"]).fetch(cfg)
    for line in notes:
        cli.console(f"fetch_prices: {line}")
    artifacts.write_parquet(table, args.out)
    span = f"{table.date.min().date()} .. {table.date.max().date()}" if len(table) else "no dates"
    cli.console(f"fetch_prices: {len(table)} rows, {span} -> {args.out}")


if __name__ == "__main__":
    cli.run(main)
