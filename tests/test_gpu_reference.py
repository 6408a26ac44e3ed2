"""configs/llama_3b_node.yaml, the run a GPU user starts from, as Slurm would get it: the dry
run through profiles/slurm lists each GPU job with the node's GPUs and memory, grpo_train
launched on every GPU under ZeRO-3, and rollout and evaluate on vLLM. What runs on the GPUs
themselves is benchmarks/gpu's (docs/running.md); this checks what the scheduler is asked."""

import re

from conftest import ROOT, run

GPU_JOBS = {"rollout": (8, 256000), "grpo_train": (8, 512000), "evaluate": (8, 256000)}


def _jobs(out: str) -> list[tuple[str, dict, str]]:
    """Each job of a dry run's -p listing: its rule, its resources and its shell command."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:)", out):
        rule = re.match(r"rule (\w+):", block)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if rule and resources:
            pairs = dict(p.split("=", 1) for p in resources[1].split(", "))
            command = re.search(r"^Shell command: (.*)$", block, re.M)
            jobs.append((rule[1], pairs, command[1] if command else ""))
    return jobs


def test_the_reference_gpu_run_asks_slurm_for_the_node_from_any_directory(tmp_path):
    out = run(
        "snakemake", "-s", ROOT / "Snakefile", "--profile", ROOT / "profiles" / "slurm", "-n", "-p",
        "--quiet", "host", "--configfile", ROOT / "config.yaml", ROOT / "configs" / "llama_3b_node.yaml",
        cwd=tmp_path,
    )  # fmt: skip
    jobs = _jobs(out.stdout + out.stderr)
    assert sorted({rule for rule, *_ in jobs}) == sorted(
        ["all", "audit", "base_model", "build_states", "evaluate", "fetch_prices", "grpo_train", "rollout",
         "score", "summarize"]
    )  # fmt: skip
    assert sum(rule == "grpo_train" for rule, *_ in jobs) == 4  # rounds: 4
    for rule, resources, command in jobs:
        if rule in GPU_JOBS:
            gpus, mem = GPU_JOBS[rule]
            assert (int(resources["gpu"]), int(resources["mem_mb"])) == (gpus, mem), (rule, resources)
            assert '"name_or_path": "meta-llama/Llama-3.2-3B-Instruct"' in command
        else:  # CPU jobs keep the profile's defaults
            assert "gpu" not in resources and int(resources["mem_mb"]) == 8000, (rule, resources)
        if rule == "grpo_train":
            # one process per GPU, ZeRO-3 from the checkout although the run is elsewhere
            assert f"--nproc 8 --accelerate-config {ROOT}/configs/accelerate/zero3.yaml" in command
        if rule in ("rollout", "evaluate"):
            assert '"backend": "vllm"' in command and '"tensor_parallel_size": 1' in command


def test_an_accelerate_config_that_is_nowhere_is_one_line(tmp_path):
    (tmp_path / "run.yaml").write_text("train: {accelerate_config: configs/accelerate/zero4.yaml}\n")
    out = run(
        "snakemake", "-s", ROOT / "Snakefile", "-n", "--configfile", ROOT / "config.yaml", "run.yaml",
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert (
        f"hitchhiker: error: config key train.accelerate_config: configs/accelerate/zero4.yaml does not exist "
        f"(here or in {ROOT})" in out.stderr
    ), out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_the_answer_word_first_under_deepspeed_is_refused_before_any_job(tmp_path):
    # full_information's decision_epochs trains two Trainers in one process: not under DeepSpeed
    (tmp_path / "run.yaml").write_text(
        "train: {objective: full_information, accelerate_config: configs/accelerate/zero2.yaml,"
        " full_information: {decision_epochs: 2}}\n"
    )
    out = run(
        "snakemake", "-s", ROOT / "Snakefile", "-n", "--configfile", ROOT / "config.yaml", "run.yaml",
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert (
        "hitchhiker: error: config key train.full_information.decision_epochs = 2: not under DeepSpeed "
        f"({ROOT}/configs/accelerate/zero2.yaml: " in out.stderr
    ), out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "rule " not in out.stdout
