"""launch: start grpo_train on N processes, on GPUs or on CPU.

On GPUs: accelerate launch with N processes (and the accelerate config, if given). On CPU
with an accelerate config (DeepSpeed ZeRO-2/3 on gloo workers): accelerate launch too, with
DS_ACCELERATOR=cpu and fp32 (bf16 autocast would make the CPU run a different experiment).
On CPU otherwise, with N > 1: torchrun, because accelerate launch --cpu --num_processes N
starts a single process; under torchrun the Trainer's use_cpu gives accelerate's MULTI_CPU
over gloo. On CPU with one process: plain python.

Usage:
  python -m hitchhiker.launch --nproc 2 [--accelerate-config configs/accelerate/zero2.yaml] \\
      -- --config config.yaml --round 1 --buffer ... --policy ... --out ...
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

# glibc hands every block over 32 MiB (the LM head's logits) back to the OS when freed and
from hitchhiker import cli

# page-faults it in anew at the next use; keeping them, 7% of a SmolLM2 step on 2 cores
CPU_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


# accelerate launch and torchrun as this interpreter's modules: the console scripts need the
# environment's bin/ on PATH (not there when a venv's python is called by its path), and one
# found there may belong to another environment
ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def command(nproc: int, accelerate_config: str | None, rest: list[str], cuda: bool) -> list[str]:
    if cuda:
        launch = [*ACCELERATE, "--num_processes", str(nproc)]
        launch += (
            ["--config_file", accelerate_config]
            if accelerate_config
            else ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
        )
    elif accelerate_config:
        launch = [*ACCELERATE, "--num_processes", str(nproc), "--config_file", accelerate_config,
                  "--mixed_precision", "no"]  # fmt: skip
    elif nproc > 1:
        launch = [*TORCHRUN, "--standalone", "--nproc_per_node", str(nproc)]
    else:
        launch = [sys.executable]
    return [*launch, "-m", "hitchhiker.stages.grpo_train", *rest]


def cuda_available() -> bool:
    """torch.cuda.is_available(), without importing torch where it is a CPU build, which never
    has CUDA: the build's version file says what it was built for. On a laptop CPU the import
    costs 3-4 s, which the process this one becomes would pay again."""
    origin = importlib.util.find_spec("torch").origin
    spec = importlib.util.spec_from_file_location("_torch_build", Path(origin).parent / "version.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)  # a dozen assignments; importing torch.version would import torch
    if getattr(build, "cuda", "?") is None and getattr(build, "hip", "?") is None:
        return False  # built for the CPU only; a version file that says otherwise, or nothing, asks torch
    import torch

    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> None:
    p = cli.parser(__doc__)
    p.add_argument("--nproc", type=int, required=True)
    p.add_argument("--accelerate-config")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="grpo_train's arguments, after --")
    args = p.parse_args(argv)
    if args.nproc < 1:
        raise cli.HitchhikerError(f"--nproc {args.nproc}: need at least one process")
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    cuda = cuda_available()
    cmd = command(args.nproc, args.accelerate_config, rest, cuda)
    if not cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed would look for a GPU
        for key, value in CPU_MALLOC.items():
            os.environ.setdefault(key, value)
        if args.nproc > 1:  # the job's threads (Snakemake's OMP_NUM_THREADS) shared among the workers
            threads = int(os.environ.get("OMP_NUM_THREADS") or len(os.sched_getaffinity(0)))
            os.environ["OMP_NUM_THREADS"] = str(max(1, threads // args.nproc))
    print("launch:", " ".join(cmd), flush=True)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    cli.run(main, announce=False)  # it becomes grpo_train, which says when it starts and ends
