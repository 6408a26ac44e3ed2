"""Checks the Snakefile runs before any job (rules/common.smk), for mistakes that would
otherwise stop a job after others had run: the model's path and the engines the config
names (the data's are fetch_prices.preflight). Light imports only: the Snakefile runs them
at every invocation, and base_model imports this module.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hitchhiker.cli import HitchhikerError


def check_model(model_cfg: dict) -> None:
    """A local model path that is not there (a hub id is left to base_model, which downloads)."""
    name = model_cfg["name_or_path"]
    local = Path(name).expanduser()
    if name.endswith(".gguf") and not local.is_file():
        raise HitchhikerError(f"config key model.name_or_path: GGUF file {name} does not exist")
    if name.endswith(".gguf"):
        with local.open("rb") as f:  # every GGUF file opens with these four bytes (the format's magic)
            if f.read(4) != b"GGUF":
                raise HitchhikerError(
                    f"config key model.name_or_path: {name} is not a GGUF file (it does not start with the GGUF "
                    "magic bytes); give a .gguf model file, a Hugging Face folder or a hub id"
                )
    if name.startswith(("/", "./", "../", "~")) and not name.endswith(".gguf") and not local.is_dir():
        raise HitchhikerError(f"config key model.name_or_path: directory {name} does not exist")


def check_engines(cfg: dict) -> None:
    """The generation engine the config names is installed (skipped under --use-conda, where
    each rule's environment brings its own)."""
    if cfg["rollout"]["backend"] == "vllm" and importlib.util.find_spec("vllm") is None:
        raise HitchhikerError(
            "config key rollout.backend = vllm, but vLLM is not installed: envs/install-cpu-engines on a "
            "CPU, pip install vllm on a GPU machine, or run with --use-conda"
        )


def check_accelerate(cfg: dict) -> None:
    """What the accelerate config (train.accelerate_config, resolved to a file) launches and the
    objective cannot take: two Trainers in one process under DeepSpeed (full_information's
    decision_epochs; grpo_train refuses it too, once the model is loaded)."""
    path, tr = cfg["train"]["accelerate_config"], cfg["train"]
    if not path:
        return
    import yaml  # light, and Snakemake's own dependency

    try:
        launch = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as err:
        raise HitchhikerError(f"config key train.accelerate_config: {path} is not YAML ({err.problem})") from None
    first = tr["full_information"]["decision_epochs"] if tr["objective"] == "full_information" else 0
    if first and isinstance(launch, dict) and launch.get("distributed_type") == "DEEPSPEED":
        raise HitchhikerError(
            f"config key train.full_information.decision_epochs = {first}: not under DeepSpeed ({path}: the answer "
            "word's passes and the reason's would be two engines in one process); set it to 0"
        )


def run(cfg: dict, conda: bool) -> None:
    check_model(cfg["model"])
    check_accelerate(cfg)
    if not conda:
        check_engines(cfg)
