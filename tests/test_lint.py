"""Lint is part of the test command: ruff, snakefmt and snakemake --lint must all be clean."""

import ast

import pytest

from conftest import ROOT, run

CODE = ["workflow", "tests", "benchmarks/e2e"]


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
