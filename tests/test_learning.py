"""The RL loop learns the planted signal: on the synthetic market (AR(1) returns, the last
shown return predicts the next), the trained tiny policy picks the better ticker on
held-out dates well above chance, and earns more than the random and always-first
baselines (configs/synthetic.yaml through the real Snakemake DAG; about 8 minutes)."""

import collections
import json

import numpy as np
import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT, run, stage, tiny_config, write_config
from hitchhiker import policy
from hitchhiker.environments.market import answers, prompts

pytestmark = pytest.mark.slow  # the signal-learning run


def test_the_trained_policy_reads_the_planted_signal_on_held_out_dates(tmp_path):
    # every round trained as `snakemake --configfile configs/synthetic.yaml` trains it; only
    # the base and the last round evaluated (the other 13 evaluations cost 100 s and are not
    # what is checked), then summarize on those two, as the full run's summarize computes them
    last_round = yaml.safe_load((ROOT / "configs" / "synthetic.yaml").read_text())["rounds"]
    res = tmp_path / "results" / "synthetic"
    files = ("predictions.parquet", "metrics.json")
    evals = [f"results/synthetic/eval/round_{r}/{f}" for r in (0, last_round) for f in files]
    run("snakemake", "-s", ROOT / "Snakefile", "--configfile", ROOT / "configs" / "synthetic.yaml", "--cores", "2",
        *evals, cwd=tmp_path)  # fmt: skip
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for key, value in yaml.safe_load((ROOT / "configs" / "synthetic.yaml").read_text()).items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) and isinstance(cfg.get(key), dict) else value
    sections = ("run", "seed", "environment", "states", "reward")  # those summarize reads; the schema fills the rest
    stage("summarize", "--config", json.dumps({k: cfg[k] for k in sections if k in cfg}),
          "--states", res / "states.parquet", "--outcomes", res / "outcomes.parquet",
          "--predictions", *(tmp_path / e for e in evals[::2]), "--metrics", *(tmp_path / e for e in evals[1::2]),
          "--out-json", tmp_path / "metrics.json", "--out-plot", tmp_path / "curve.png",
          "--out-env-plots", tmp_path / "equity_curves.png", tmp_path / "calibration.png",
          "--out-invalid", tmp_path / "invalid.png", "--out-headline", tmp_path / "headline.csv")  # fmt: skip
    summary = json.loads((tmp_path / "metrics.json").read_text())
    last = summary["rounds"][-1]["greedy"]
    assert summary["rounds"][-1]["round"] == last_round
    print(f"greedy accuracy {last['accuracy']}, reward {last['mean_reward']}")
    assert last["valid_rate"]["mean"] > 0.95
    assert last["accuracy"]["ci95"][0] > 0.60, last["accuracy"]  # the signal, not the format
    versus = summary["reward_minus_baseline"]["greedy"]
    for baseline in ("random", "always_first"):
        assert versus[baseline]["ci95"][0] > 0, (baseline, versus[baseline])


def test_the_format_warmup_teaches_the_format_and_no_label(tmp_path):
    """model.tiny.format_warmup_steps: the random model answers validly, with both labels."""
    tiny = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "format_warmup_steps": 100}
    cfg = write_config(tmp_path / "c.yaml", tiny_config(model={"name_or_path": "tiny", "tiny": tiny}))
    stage("base_model", "--config", cfg, "--out", tmp_path / "p0")
    tok = AutoTokenizer.from_pretrained(tmp_path / "p0" / "model")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "p0" / "model")
    rng = np.random.default_rng(1)
    texts = [
        policy.chat(tok, prompts.render("pairwise", ["KO", "HD"], rng.normal(0, 0.01, (2, 5)), 5)) for _ in range(128)
    ]
    batch = tok(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(**batch, max_new_tokens=3, do_sample=True, temperature=1.0)
    texts = tok.batch_decode(out[:, batch.input_ids.shape[1] :], skip_special_tokens=True)
    picks = collections.Counter(a.action if a.valid else None for a in (answers.parse(t, "pairwise", 2) for t in texts))
    assert picks[None] < 0.15 * 128, picks  # valid: the random-init model is at about 2%
    assert min(picks["A"], picks["B"]) > 0.3 * 128, picks  # and neither label taught
