"""Lint is part of the test command: ruff, snakefmt and snakemake --lint must all be clean."""

import ast

import pytest

from conftest import ROOT, run
from hitchhiker import environments

CODE = ["workflow", "tests", "benchmarks"]


@pytest.mark.parametrize(
    "cmd",
    [
        ["ruff", "check", *CODE],
        ["ruff", "format", "--check", *CODE],
        ["snakefmt", "--check", "Snakefile", "workflow/rules"],
        ["snakemake", "--lint"],
    ],
    ids=["ruff", "ruff-format", "snakefmt", "snakemake-lint"],
)
def test_clean(cmd):
    proc = run(*cmd, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if cmd[0] == "snakemake":
        assert "Congratulations" in proc.stdout + proc.stderr


def test_no_stage_imports_an_environment_module():
    """Stages reach an environment only through the protocol (hitchhiker.environments.get)."""
    package = ROOT / "workflow" / "hitchhiker"
    offenders = []
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("hitchhiker.environments.")]
    assert not offenders, offenders


def test_called_by_names_every_stage_that_calls_those_methods():
    """sources.files leaves a module imported inside a method of base.CALLED_BY out of the
    code inputs of the stages not named there, so every stage that runs code calling the
    method must be named (a stage left out would not rerun when that module changes)."""
    import re

    from hitchhiker import sources
    from hitchhiker.environments.base import CALLED_BY

    package = ROOT / "workflow" / "hitchhiker"
    stages = [p.stem for p in package.glob("*.py") if "\nSECTIONS = " in p.read_text()]
    assert {"score", "evaluate", "summarize", "rollout", "build_states"} <= set(stages)
    for method, named in CALLED_BY.items():
        call = re.compile(rf"\benv\.{method}\(|\.get\([^)]*\)\.{method}\(")
        callers = {str(p) for p in package.glob("*.py") if call.search(p.read_text())}
        assert callers, f"no stage calls {method}"
        for stage in stages:
            for environment in environments.ENVIRONMENTS:
                if callers & set(sources.files(stage, environment)):
                    assert stage in named, f"{stage} calls {method} but CALLED_BY[{method!r}] = {named}"
