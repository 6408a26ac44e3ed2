"""Config validation: defaults, and one-line errors that name the key at fault."""

import copy
from pathlib import Path

import pytest
import torch
import yaml

from conftest import ROOT, run, stage, tiny_config, write_config
from hitchhiker import config, environments, policy
from hitchhiker.cli import HitchhikerError


def test_default_config_validates_and_fills_defaults():
    cfg = config.load(ROOT / "config.yaml")
    assert cfg["rollout"]["temperature"] == 0.7
    assert cfg["train"]["lora"]["target_modules"] == "all-linear"
    assert cfg["model"]["trust_remote_code"] is False


def test_model_dtype_fast_is_bfloat16_exactly_where_the_cpu_computes_it_natively(capsys):
    # the kernel's flags: an independent reading of what torch's cpuinfo detects
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    flags = next(
        (line.split(":")[1].split() for line in cpuinfo.splitlines() if line.startswith(("flags", "Features"))), None
    )
    if flags is None or torch.cuda.is_available():
        pytest.skip("no CPU flags in /proc/cpuinfo to compare with, or a GPU decides")
    native = bool({"avx512_bf16", "amx_bf16", "bf16"} & set(flags))
    model = config.load(ROOT / "config.yaml")["model"]
    policy._say.cache_clear()  # each line is said once a process: this worker's may have said it
    assert model["dtype"] == "fast"  # the default run's
    assert policy.dtype(model) == ("bfloat16" if native else "float32")
    assert f"model.dtype fast: {'bfloat16' if native else 'float32'} (" in capsys.readouterr().out
    if not native:  # an explicit bfloat16 is kept, and the stage says what it costs here
        assert policy.dtype({"dtype": "bfloat16"}) == "bfloat16"
        assert "no native bfloat16 here" in capsys.readouterr().out


@pytest.mark.parametrize("native", [None, "amx_bf16"])
def test_model_dtype_auto_says_when_a_bfloat16_checkpoint_runs_emulated(tmp_path, monkeypatch, capsys, native):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tmp_path / "model")
    policy.write_spec(tmp_path, "model", 0)
    monkeypatch.setattr(policy, "native_bfloat16", lambda: native)
    policy._say.cache_clear()
    model = policy.load_model(tmp_path, {"dtype": "auto", "trust_remote_code": False})
    assert model.dtype == torch.bfloat16  # auto keeps the checkpoint's dtype either way
    said = "model.dtype auto: the checkpoint is bfloat16: no native bfloat16 here, its matmuls are emulated"
    assert (said in capsys.readouterr().out) == (native is None)


def _keys(node: dict, path: str = ""):
    """(dotted key, its schema) for every key the schema defines, nested ones included."""
    for name, sub in (node.get("properties") or {}).items():
        yield f"{path}{name}", sub
        yield from _keys(sub, f"{path}{name}.")


def test_every_config_key_says_what_it_does():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    keys = [*_keys(schema), *(kv for name, d in schema["$defs"].items() for kv in _keys(d, f"{name}."))]
    assert len(keys) > 80
    own = {name: environments.get(name).config_schema for name in environments.ENVIRONMENTS}
    keys += [(name, sub) for name, sub in own.items() if sub] + [
        kv for name, sub in own.items() if sub for kv in _keys(sub, f"{name}.")
    ]
    assert "weather.rain_mm" in dict(keys)
    assert [key for key, sub in keys if not sub.get("description")] == []


def test_the_default_config_sets_only_what_it_changes():
    # defaults live in the schema: a key config.yaml sets to its default would be a second copy
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())

    def same(cfg: dict, node: dict, path: str = ""):
        for key, value in cfg.items():
            sub = node["properties"][key]
            if isinstance(value, dict) and "properties" in sub:
                yield from same(value, sub, f"{path}{key}.")
            elif sub.get("default", object()) == value:
                yield f"{path}{key}"

    default = yaml.safe_load((ROOT / "config.yaml").read_text())
    market = {"properties": {"market": environments.get("market").config_schema}}
    assert list(same({"market": default.pop("market")}, market)) + list(same(default, schema)) == []


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["rollout"].update(tempreature=0.5), "unknown config key rollout.tempreature"),
        (lambda c: c.update(rouns=2), "unknown config key rouns"),
        (
            lambda c: c.setdefault("reward", {}).update(unsupported_claim_penalty=0.01),
            "config key reward.unsupported_claim_penalty is now grounding.unsupported_claim_penalty",
        ),
        (lambda c: c.update(data={"tickers": ["AAPL", "KO"]}), "config key data.tickers is now market.data.tickers"),
        (lambda c: c["states"].update(formats=["pairwise"]), "config key states.formats is now market.states.formats"),
        (lambda c: c.update(weather={"place": "Oslo"}), "unknown config key weather"),  # a market run reads none
        (lambda c: c["rollout"].update(samples_per_state="4"), "rollout.samples_per_state"),
        (lambda c: c["rollout"].update(samples_per_state=1), "rollout.samples_per_state"),
        (lambda c: c["states"].update(horizon=0), "states.horizon"),
        (lambda c: c.update(rounds=0), "rounds"),
        (lambda c: c["market"]["data"].update(tickers=[]), "market.data.tickers"),
        (lambda c: c["market"]["data"].update(tickers=["AAPL"]), "pairwise states need at least 2 tickers"),
        (lambda c: c["states"]["train"].update(start="2019-01-01", end="2018-01-01"), "states.train: start"),
        (lambda c: c["states"]["test"].update(start="2015-01-01", end="2015-12-31"), "states.test.start"),
        (lambda c: c["states"]["test"].update(start="2019-13-01"), "states.test.start"),
        (lambda c: c["states"].update(embargo=2), "states.embargo"),
        (lambda c: c["rollout"].update(temperature_eps=0.8), "rollout.temperature_eps"),
        (lambda c: c["train"].update(per_device_batch_size=6), "train.per_device_batch_size"),
        (lambda c: c["rollout"].update(tensor_parallel_size=2), "rollout.tensor_parallel_size = 2 applies only"),
        (lambda c: c["rollout"].update(vllm_lora=True), "rollout.vllm_lora = true applies only to rollout.backend"),
        (lambda c: c["rollout"].update(vllm_cpu_kv_cache_gib=4), "rollout.vllm_cpu_kv_cache_gib = 4 applies only"),
        (
            lambda c: (c["rollout"].update(backend="vllm", vllm_lora=True), c["train"]["lora"].update(enabled=False)),
            "rollout.vllm_lora = true, but train.lora.enabled = false",
        ),
        (lambda c: c["rollout"].update(each_answer=True), "rollout.each_answer = true writes the answers for"),
        (
            lambda c: (c["rollout"].update(each_answer=True), c["train"].update(objective="full_information")),
            "only train.objective full_information with train.full_information.rationale best_answers",
        ),
        (
            lambda c: (
                c["rollout"].update(each_answer=True),
                c["train"].update(objective="full_information", full_information={"rationale": "best_answers"}),
            ),
            "rollout.each_answer = true trains a reason only where grounding.reason_bonus pays it",
        ),
        (
            lambda c: c["train"].update(objective="best_answers", importance_sampling={"enabled": True}),
            "train.importance_sampling.enabled = true applies only to train.objective = grpo, not best_answers",
        ),
        (
            lambda c: c["train"].update(objective="best_answers", share_prompt=True),
            "train.share_prompt = true applies only to train.objective = dpo or full_information or grpo",
        ),
        (lambda c: c["train"].update(objective="dpo", beta=0.04), "train.beta = 0.04 applies only"),
        (
            lambda c: c["train"].update(dpo={"margin": 0.01}),
            "train.dpo.margin = 0.01 applies only to train.objective = dpo",
        ),
        (lambda c: c["train"].update(objective="sft"), "train.objective"),
        (
            lambda c: (
                c.update(environment="sequential"),
                c["train"].update(objective="full_information"),
                c["market"]["states"].update(formats=["pairwise"], turns=1),
            ),
            "train.objective = full_information: the sequential environment does not price every action",
        ),
        (
            lambda c: (
                c.update(environment="sequential"),
                c["train"].update(objective="dpo"),
                c["market"]["states"].update(formats=["pairwise"], turns=1),
            ),
            "train.objective = dpo: the sequential environment's completions hold the environment's turns",
        ),
        (lambda c: c["train"].update(objective="dpo", per_device_batch_size=6), None),
        (lambda c: c["rollout"].update(dynamic_sampling=0.5), "rollout.dynamic_sampling"),
        (
            lambda c: (c["rollout"].update(dynamic_sampling=3), c["train"].update(objective="full_information")),
            "rollout.dynamic_sampling = 3: train.objective full_information trains every action's reward",
        ),
        (lambda c: c["rollout"].update(dynamic_sampling=3), None),
        (
            lambda c: c["train"].update(objective="full_information", full_information={"decision_rounds": 1}),
            "train.full_information.decision_rounds = 1: the rounds after it train the reasons alone",
        ),
        (
            lambda c: c["train"].update(
                objective="full_information", full_information={"decision_rounds": 1, "rationale": "best_answers"}
            ),
            None,
        ),
        (
            lambda c: c["train"].update(
                objective="full_information", full_information={"push_budget": 1.0, "rationale": "best_answers"}
            ),
            "train.full_information.push_budget = 1.0: it scales the reasons pushed down",
        ),
        (
            lambda c: (
                c["train"].update(
                    objective="full_information", full_information={"push_budget": 1.0, "rationale": "best_answers"}
                ),
                c["rollout"].update(each_answer=True),
                c.update(grounding={"reason_bonus": 0.01}),
            ),
            None,
        ),
        (lambda c: c.update(run="../escape"), 'config key run = "../escape": not a run name'),
        (lambda c: c["market"]["data"].update(tickers=["AAPL", "MSFT; rm -rf /"]), "market.data.tickers"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(mutate, message):
    cfg = copy.deepcopy(tiny_config())
    mutate(cfg)
    if message is None:  # a good config of the same kind, for contrast
        config.validate(cfg)
        return
    with pytest.raises(HitchhikerError) as err:
        config.validate(cfg)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_stage_command_reports_bad_config_in_one_line_and_writes_nothing(tmp_path):
    cfg = tiny_config()
    cfg["states"]["windw"] = 3
    path = write_config(tmp_path / "config.yaml", cfg)
    proc = stage("fetch_prices", "--config", path, "--out", tmp_path / "prices.parquet", check=False)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "unknown config key states.windw" in proc.stderr
    )
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "prices.parquet").exists()


def test_unknown_ticker_is_named(tmp_path):
    path = write_config(
        tmp_path / "config.yaml", tiny_config(market={"data": {"source": "sample", "tickers": ["AAPL", "NOPE"]}})
    )
    proc = stage("fetch_prices", "--config", path, "--out", tmp_path / "p.parquet", check=False)
    assert proc.returncode == 2 and "NOPE not in the sample source" in proc.stderr
    assert not (tmp_path / "p.parquet").exists()


@pytest.mark.parametrize("overlay", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_each_shipped_overlay_validates_over_the_default_config(overlay):
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for key, value in yaml.safe_load((ROOT / "configs" / overlay).read_text()).items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) and isinstance(cfg.get(key), dict) else value
    # Snakemake merges --configfile overlays the same way, key by key; common.smk then drops
    # config.yaml's sections that the overlay's environment does not read (the weather's: market)
    config.drop_inherited(cfg, [ROOT / "config.yaml"], [ROOT / "configs" / overlay])
    config.validate(cfg)
    assert cfg["run"] == overlay.removesuffix(".yaml")


def test_a_value_given_as_text_gets_the_hint_of_where_it_came_from(monkeypatch):
    cfg = tiny_config(states={**tiny_config()["states"], "window": "5"})
    with pytest.raises(HitchhikerError, match=r"states\.window = \"5\": .* \(quoted in YAML, a value is text\)$"):
        config.validate(copy.deepcopy(cfg))
    monkeypatch.setattr("sys.argv", ["/venv/bin/snakemake", "--config", "states={window: 5}"])
    with pytest.raises(HitchhikerError, match="snakemake --config reads a nested value as text"):
        config.validate(copy.deepcopy(cfg))


def test_a_weather_overlay_drops_the_default_runs_market_section_and_refuses_its_own(tmp_path):
    # config.yaml's market section is the default run's: a weather run laid over it does not
    # carry it (and says so); a market section in the weather file itself is refused
    proc = run(
        "snakemake", "-s", ROOT / "Snakefile", "--configfile", ROOT / "configs" / "weather.yaml", "-n", cwd=tmp_path
    )
    assert "config.yaml's market section is not read by environment weather" in proc.stderr
    own = yaml.safe_load((ROOT / "configs" / "weather.yaml").read_text())
    own["market"] = {"data": {"tickers": ["AAPL", "KO"]}}
    overlay = write_config(tmp_path / "w.yaml", own)
    proc = run("snakemake", "-s", ROOT / "Snakefile", "--configfile", overlay, "-n", cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "hitchhiker: error: unknown config key market" in proc.stderr
