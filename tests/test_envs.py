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
