"""build_states: states (prompt side, nothing after the decision date) and outcomes
(what followed it: for the market, realised forward returns), for the train and test
splits, from the data step's table.

The environment (config key ``environment``) makes them; each prompt is capped at
states.max_prompt_tokens measured with the base policy's own tokenizer and chat template,
trimming the oldest history first. The environment reads what else its prompts show (the
market: market.data.news, market.data.signals), each as of the decision date.

Usage:
  python -m hitchhiker.stages.build_states --config config.yaml --data results/default/prices.parquet \\
      --policy results/default/policy/round_0 --states results/default/states.parquet \\
      --outcomes results/default/outcomes.parquet
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hitchhiker import artifacts, cli, config, environments, policy

SECTIONS = ["run", "seed", "environment", "states", "model"]


def budget_check(tok, chunk: int = 20_000):
    """(texts, budget) -> whether each chat-templated prompt has at most ``budget`` tokens.

    Tokenizing every prompt would cap build_states at the tokenizer's speed (about 16k
    prompts/s on 2 cores), so a prompt is tokenized only when a bound cannot decide: each
    token of a BPE, WordPiece or Unigram tokenizer covers at least one byte of the text, so
    UTF-8 bytes + 1 (a leading word marker) bounds the count from above. The bound is
    checked against exact counts on a sample of every call, and dropped if it ever fails.
    The chat template is applied once to a marker and split around it; a template that does
    not insert the message verbatim falls back to applying it per text.
    """
    marker = "\x00hitchhiker\x00"
    prefix, _, suffix = policy.chat(tok, marker).partition(marker)
    verbatim = policy.chat(tok, "A: +1.00\nB") == f"{prefix}A: +1.00\nB{suffix}"
    backend = getattr(tok, "_tokenizer", None)
    sound = True

    def exact(texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), chunk):  # chunks: a batch's encodings are heavy
            part = texts[i : i + chunk]
            full = [f"{prefix}{t}{suffix}" for t in part] if verbatim else [policy.chat(tok, t) for t in part]
            if backend is not None:
                out.extend(len(e.ids) for e in backend.encode_batch_fast(full, add_special_tokens=False))
            else:
                out.extend(len(ids) for ids in tok(full, add_special_tokens=False).input_ids)
        return np.array(out, dtype=np.int64)

    def fits(texts: pa.Array | list[str], budget: int) -> np.ndarray:
        nonlocal sound
        texts = texts if isinstance(texts, pa.Array) else pa.array(texts, type=pa.string())
        bound = pc.binary_length(texts).to_numpy(zero_copy_only=False) + len(f"{prefix}{suffix}".encode()) + 1
        if sound:
            sample = np.random.default_rng(0).permutation(len(texts))[:256]
            sound = bool(np.all(exact(texts.take(pa.array(sample)).to_pylist()) <= bound[sample]))
        ok = bound <= budget if sound else np.zeros(len(texts), bool)
        unsure = np.flatnonzero(~ok)
        if len(unsure):
            ok[unsure] = exact(texts.take(pa.array(unsure)).to_pylist()) <= budget
        return ok

    return fits


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--data", required=True, help="the data step's table (for the market, prices.parquet)")
    p.add_argument("--policy", required=True, help="base policy directory (for its tokenizer)")
    p.add_argument("--states", required=True, help="Parquet to write")
    p.add_argument("--outcomes", required=True, help="Parquet to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    tok = policy.load_tokenizer(args.policy, cfg["model"])
    env = environments.get(cfg["environment"])
    data = artifacts.read_parquet(args.data, list(env.data_columns))
    states, outcomes = env.make_states(data, cfg, budget_check(tok))
    artifacts.write_parquet(outcomes, args.outcomes)
    artifacts.write_parquet(states, args.states)
    counts = states.groupby(["split", "format"]).size().to_dict()
    cli.console(f"build_states: {len(states)} states {counts} -> {args.states}")
    for note in beyond_the_data(cfg["states"], data["date"], states) if env.dated_splits else []:
        cli.console(f"build_states: {note}")


def beyond_the_data(st: dict, dates: pd.Series, states: pd.DataFrame) -> list[str]:
    """A line for each split whose configured dates run past the data's: it is cut to the
    data, which a reader of the config would not guess."""
    first, last = pd.Timestamp(dates.min()), pd.Timestamp(dates.max())
    notes = []
    for split, days in states.groupby("split")["date"]:
        lo, hi = pd.Timestamp(st[split]["start"]), pd.Timestamp(st[split]["end"])
        if hi > last:
            notes.append(f"states.{split}.end = {hi.date()} is after the data's last date {last.date()}: "
                         f"the split's last decision date is {pd.Timestamp(days.max()).date()}")  # fmt: skip
        if lo < first:
            notes.append(f"states.{split}.start = {lo.date()} is before the data's first date {first.date()}: "
                         f"the split's first decision date is {pd.Timestamp(days.min()).date()}")  # fmt: skip
    return notes


if __name__ == "__main__":
    cli.run(main)
