"""The shipped accelerate configs load with accelerate's own loader and say what their names say."""

import pytest
from accelerate.commands.config.config_args import load_config_from_file

from conftest import ROOT, run, tiny_config, write_config

CONFIGS = ROOT / "configs" / "accelerate"


@pytest.mark.parametrize(
    "name, kind, stage",
    [
        ("single_gpu", "NO", None),
        ("multi_gpu", "MULTI_GPU", None),
        ("zero2", "DEEPSPEED", 2),
        ("zero3", "DEEPSPEED", 3),
    ],
)
def test_shipped_accelerate_configs_load(name, kind, stage):
    cfg = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
    assert str(cfg.distributed_type).endswith(kind) and cfg.mixed_precision == "bf16"
    assert (cfg.deepspeed_config or {}).get("zero_stage") == stage


def test_the_rule_launches_with_the_chosen_config_file_and_the_gpu_count(tmp_path):
    zero2 = str(CONFIGS / "zero2.yaml")
    write_config(tmp_path / "config.yaml", tiny_config(train={"accelerate_config": zero2}))
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", tmp_path / "config.yaml", "-n", "-p",
               "--set-resources", "grpo_train:gpu=4", cwd=tmp_path)  # fmt: skip
    launch = next(line for line in (proc.stdout + proc.stderr).splitlines() if "accelerate launch" in line)
    assert f"accelerate launch --num_processes 4 --config_file {zero2} -m hitchhiker.grpo_train" in launch
