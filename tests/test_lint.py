"""Lint is part of the test command: ruff, snakefmt and snakemake --lint must all be clean."""

import ast
import re

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


PACKAGE = ROOT / "workflow" / "hitchhiker"


def _imported(path):
    """The hitchhiker modules a file imports ("from hitchhiker.x import y" names x and x.y)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return [n for n in names if n.startswith("hitchhiker")]


def _module(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_stage_imports_an_environment_module():
    """Only the environments reach an environment's modules: the stages, the training code and
    the core modules go through the protocol (hitchhiker.environments.get)."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "environments" in path.relative_to(PACKAGE).parts:
            continue
        offenders += [f"{path.name}: {n}" for n in _imported(path) if n.startswith("hitchhiker.environments.")]
    assert not offenders, offenders


def test_no_import_circle():
    """The package's modules import one another without a circle (inside functions too)."""
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    edges = {m: {n for n in _imported(p) if n in modules and n != m} for m, p in modules.items()}
    # a package's __init__ is imported with any of its modules: a module importing its own
    # package's registry (environments) is not a circle through it unless the registry imports back
    state, circle = {}, []

    def visit(m, path):
        state[m] = "open"
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                circle.append(" -> ".join([*path[path.index(n) :], n]))
            elif n not in state:
                visit(n, [*path, n])
        state[m] = "done"

    for m in sorted(modules):
        if m not in state:
            visit(m, [m])
    assert not circle, circle


def test_the_market_stays_in_its_package():
    """No module outside environments/market/ names a market column, and the weather (the
    template for a new environment) imports nothing of the market."""
    columns = re.compile(r"\b(tickers|forward_returns|preference)\b")
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "market" in path.relative_to(PACKAGE).parts:
            continue
        code = ast.unparse(_without_docstrings(ast.parse(path.read_text())))
        offenders += [f"{path.relative_to(PACKAGE)}: {m}" for m in sorted(set(columns.findall(code)))]
    weather = [n for n in _imported(PACKAGE / "environments" / "weather.py") if ".market" in n]
    assert not offenders and not weather, offenders + weather


def test_the_stages_name_no_objective():
    """grpo_train asks the objectives' registry (training/objectives/) and branches on no name."""
    from hitchhiker.training.objectives import OBJECTIVES

    names = re.compile(rf"\b({'|'.join(OBJECTIVES)})\b")
    offenders = []
    for path in [*(PACKAGE / "stages").glob("*.py"), PACKAGE / "config.py"]:
        code = ast.unparse(_without_docstrings(ast.parse(path.read_text())))
        offenders += [f"{path.name}: {m}" for m in sorted(set(names.findall(code)))]
    assert not offenders, offenders


def _without_docstrings(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def test_called_by_names_every_stage_that_calls_those_methods():
    """sources.files leaves a module imported inside a method of sources.CALLED_BY out of the
    code inputs of the stages not named there, so every stage that runs code calling the
    method must be named (a stage left out would not rerun when that module changes)."""
    from hitchhiker import sources

    stages = [p.stem for p in (PACKAGE / "stages").glob("*.py") if "\nSECTIONS = " in p.read_text()]
    assert {"score", "evaluate", "summarize", "rollout", "build_states"} <= set(stages)
    for method, named in sources.CALLED_BY.items():
        call = re.compile(rf"\benv\.{method}\(|\.get\([^)]*\)\.{method}\(")
        outside = [p for p in PACKAGE.rglob("*.py") if "environments" not in p.relative_to(PACKAGE).parts]
        callers = {str(p) for p in outside if call.search(p.read_text())}
        assert callers, f"no stage calls {method}"
        for stage in stages:
            for environment in environments.ENVIRONMENTS:
                if callers & set(sources.files(stage, environment)):
                    assert stage in named, f"{stage} calls {method} but CALLED_BY[{method!r}] = {named}"
