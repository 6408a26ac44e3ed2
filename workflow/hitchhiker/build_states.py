"""build_states: states (prompt side, nothing after the decision date) and outcomes
(realised forward returns), for the train and test splits, from the price table.

The environment (config key ``environment``) makes them; each prompt is capped at
states.max_prompt_tokens measured with the base policy's own tokenizer and chat template,
trimming the oldest history first. With data.news, the headline table is read here.

Usage:
  python -m hitchhiker.build_states --config config.yaml --prices results/default/prices.parquet \\
      --policy results/default/policy/round_0 --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitchhiker import artifacts, cli, config, environments, policy

SECTIONS = ["run", "seed", "environment", "data", "states", "model"]


def token_counter(tok):
    """texts -> token counts of their chat-templated prompts, tokenized in one Rust batch.

    The chat template is applied once to a marker and split around it; a template that does
    not insert the message verbatim falls back to applying it per text.
    """
    marker = "\x00hitchhiker\x00"
    prefix, _, suffix = policy.chat(tok, marker).partition(marker)
    verbatim = policy.chat(tok, "A: +1.00\nB") == f"{prefix}A: +1.00\nB{suffix}"
    backend = getattr(tok, "_tokenizer", None)

    def count(texts: list[str]) -> np.ndarray:
        full = [f"{prefix}{t}{suffix}" for t in texts] if verbatim else [policy.chat(tok, t) for t in texts]
        if backend is not None:
            return np.array([len(e.ids) for e in backend.encode_batch_fast(full, add_special_tokens=False)])
        return np.array([len(ids) for ids in tok(full, add_special_tokens=False).input_ids])

    return count


def read_news(path: str) -> pd.DataFrame:
    """The headline table (date, ticker, headline), one line per headline."""
    p = Path(path)
    if not p.is_file():
        raise cli.HitchhikerError(f"config key data.news: {path} does not exist")
    try:
        raw = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    except Exception as err:  # pandas raises many types for malformed files
        raise cli.HitchhikerError(f"news file {path}: cannot read ({str(err).splitlines()[0]})") from None
    missing = {"date", "ticker", "headline"} - set(raw.columns)
    if missing:
        raise cli.HitchhikerError(f"news file {path}: missing column {', '.join(sorted(missing))}")
    dates = pd.to_datetime(raw["date"], format="ISO8601", errors="coerce")
    if dates.isna().any():
        row = int(dates.isna().to_numpy().argmax())
        raise cli.HitchhikerError(f"news file {path}: unreadable date {raw['date'].iloc[row]!r} in row {row + 1}")
    return pd.DataFrame(
        {
            "date": dates.dt.normalize(),
            "ticker": raw["ticker"].astype(str),
            "headline": raw["headline"].astype(str).str.replace(r"\s+", " ", regex=True).str.strip(),
        }
    )


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
    news = read_news(cfg["data"]["news"]) if cfg["data"]["news"] else None
    env = environments.get(cfg["environment"])
    states, outcomes = env.make_states(prices, cfg, token_counter(tok), news)
    artifacts.write_parquet(outcomes, args.outcomes)
    artifacts.write_parquet(states, args.states)
    counts = states.groupby(["split", "format"]).size().to_dict()
    print(f"build_states: {len(states)} states {counts} -> {args.states}")


if __name__ == "__main__":
    cli.run(main)
