"""Lint is part of the test command: ruff, snakefmt and snakemake --lint must all be clean."""

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
