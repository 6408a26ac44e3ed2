"""The shipped accelerate configs load with accelerate's own loader and say what their names say."""

import sys

import pytest
from accelerate.commands.config.config_args import load_config_from_file

from conftest import ROOT, run, tiny_config, write_config
from hitchhiker import launch

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
               "--quiet", "host", "--set-resources", "grpo_train:gpu=4", cwd=tmp_path)  # fmt: skip
    launch = next(line for line in (proc.stdout + proc.stderr).splitlines() if "hitchhiker.launch" in line)
    assert f"python -m hitchhiker.launch --nproc 4 --accelerate-config {zero2} -- --config" in launch


# this interpreter's modules, not whatever console script PATH finds
ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


@pytest.mark.parametrize(
    "cuda, nproc, config_file, head",
    [
        (True, 4, "z2.yaml", [*ACCELERATE, "--num_processes", "4", "--config_file", "z2.yaml"]),
        (True, 1, None, [*ACCELERATE, "--num_processes", "1", "--num_machines", "1"]),
        (False, 2, None, [*TORCHRUN, "--standalone", "--nproc_per_node", "2"]),  # gloo workers
        # DeepSpeed's own CPU accelerator, in fp32 (tests/test_deepspeed.py runs it)
        (False, 2, "z2.yaml", [*ACCELERATE, "--num_processes", "2", "--config_file", "z2.yaml"]),
        (False, 1, None, [sys.executable]),
    ],
)
def test_launch_picks_accelerate_on_gpus_or_with_a_config_and_torchrun_on_cpu(cuda, nproc, config_file, head):
    cmd = launch.command(nproc, config_file, ["--round", "1"], cuda)
    assert cmd[: len(head)] == head and cmd[-4:] == ["-m", "hitchhiker.stages.grpo_train", "--round", "1"]


def test_launch_sees_cuda_where_torch_does():
    """launch reads a CPU build's version file instead of importing torch: the same answer."""
    import torch

    assert launch.cuda_available() == torch.cuda.is_available()
