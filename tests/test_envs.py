"""The per-stage conda envs parse, and every pin in them agrees with pyproject.toml."""

import re
import tomllib

import pytest
import yaml

from conftest import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PINS = {
    re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].lower(): req
    for req in PROJECT["dependencies"] + [r for extra in PROJECT["optional-dependencies"].values() for r in extra]
}


@pytest.mark.parametrize("env", ["data", "rollout", "train", "evaluate"])
def test_env_parses_and_agrees_with_pyproject(env):
    spec = yaml.safe_load((ROOT / "envs" / f"{env}.yaml").read_text())
    deps = spec["dependencies"]
    assert "python=3.11" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip, "no pip requirements"
    for req in pip:
        name = re.split(r"[<>=!~ \[]", req, maxsplit=1)[0].lower()
        assert req == PINS.get(name), f"envs/{env}.yaml pins {req!r}, pyproject says {PINS.get(name)!r}"


def test_every_rule_has_a_conda_env_that_exists():
    rules = (ROOT / "workflow" / "rules").glob("*.smk")
    text = "\n".join(r.read_text() for r in rules)
    n_rules = len(re.findall(r"^rule ", text, flags=re.M))
    envs = re.findall(r'conda:\n\s+"\.\./\.\./(envs/\w+\.yaml)"', text)
    assert len(envs) == n_rules
    assert all((ROOT / e).is_file() for e in envs)


def test_the_virtualenvs_snakemake_runs_a_job_without_activating_it(tmp_path):
    """`.venv/bin/snakemake` with the virtualenv not on PATH: each job's `python` is still the
    interpreter that runs Snakemake, not whichever `python` PATH finds first."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from conftest import tiny_config, write_config

    write_config(tmp_path / "config.yaml", tiny_config(run="bare"))
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}
    bare.pop("VIRTUAL_ENV", None)
    snakemake = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run(
        [str(snakemake), "-s", str(ROOT / "Snakefile"), "--cores", "1", "results/bare/prices.parquet"],
        cwd=tmp_path, env=bare, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "results" / "bare" / "prices.parquet").is_file()
