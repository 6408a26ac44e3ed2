"""base_model: the round-0 policy that every later stage loads.

model.name_or_path = tiny builds a small random-init LlamaForCausalLM and a BPE tokenizer
trained here on the prompt template, with a chat template, saved in Hugging Face format:
nothing is downloaded. Any other value (a local directory or a hub id) is written as a
pointer in policy.json and loaded by each stage with from_pretrained; its tokenizer is
loaded now to fail early if it is missing or has no chat template.

Usage:
  python -m hitchhiker.base_model --config config.yaml --out results/default/policy/round_0
"""

from __future__ import annotations

from pathlib import Path

from hitchhiker import artifacts, cli, config, policy

SECTIONS = ["run", "seed", "data", "model"]


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--out", required=True, help="policy directory to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    name = cfg["model"]["name_or_path"]
    with artifacts.atomic_path(args.out, is_dir=True) as out:
        if name == "tiny":
            policy.build_tiny(out, cfg["model"], cfg["data"]["tickers"], cfg["seed"])
            policy.write_spec(out, "model", 0)
        else:
            local = Path(name).expanduser()
            policy.write_spec(out, str(local.resolve()) if local.is_dir() else name, 0)
            policy.load_tokenizer(out, cfg["model"])
    print(f"base_model: {name} -> {args.out}")


if __name__ == "__main__":
    cli.run(main)
