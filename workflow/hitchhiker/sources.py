"""What a stage is made of, read from its source without importing it (Snakemake parses the
workflow on every run and in every Slurm job; importing a stage would import torch).

:func:`files` is a stage module's file and every hitchhiker module it imports, transitively
(inside functions too, but not inside an environment's methods that CALLED_BY names
for other stages), so a rule reruns when any code it runs changes; of the environments,
only the configured one's modules. :func:`sections` is the
stage's SECTIONS, the config sections its rule passes it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


@functools.cache
def _path(module: str) -> Path | None:
    """The file of hitchhiker module ``module`` ("hitchhiker.environments.market.environment"), if any."""
    rel = Path(*module.split(".")[1:])
    for candidate in (PACKAGE / rel / "__init__.py", (PACKAGE / rel).with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _literal(path: Path, name: str):
    """The value of the module-level assignment ``name = <literal>`` in ``path``, or None."""
    for node in _tree(path).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    return None


# The stages that call the environment methods which import modules of their own inside their
# bodies (as the market's score imports its claim checks): sources.files makes such a module a code
# input of these stages only, so that editing the claim checks reruns score onward and not
# build_states. A method not named here imports at module level, for every stage.
# tests/test_lint.py checks these against the stages' calls.
CALLED_BY: dict[str, tuple[str, ...]] = {
    "fetch": ("fetch_prices",),
    "data_files": ("fetch_prices",),
    "describe_data": ("fetch_prices",),
    "preflight_data": ("fetch_prices",),
    "score": ("score", "evaluate", "rollout"),  # rollout: under rollout.dynamic_sampling
    "claim_rates": ("evaluate", "summarize"),
    "draw_plots": ("summarize",),
}


@functools.cache
def _imports_by_method(path: Path) -> dict[frozenset[str], set[str]]:
    """The hitchhiker modules a file imports ("from hitchhiker.x import y" names x and x.y),
    by the CALLED_BY methods whose bodies hold the import (none: every stage runs it). One
    walk of each file for all stages: Snakemake parses the workflow at every invocation and
    in every Slurm job, and a walk per stage and file took 1.9 s of a 5-s dry run."""
    out: dict[frozenset[str], set[str]] = {}
    todo = [(_tree(path), frozenset())]
    while todo:
        node, methods = todo.pop()
        if isinstance(node, ast.Import):
            out.setdefault(methods, set()).update(a.name for a in node.names if a.name.startswith("hitchhiker."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("hitchhiker"):
            out.setdefault(methods, set()).update([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
        for child in ast.iter_child_nodes(node):
            named = isinstance(node, ast.ClassDef) and isinstance(child, ast.FunctionDef) and child.name in CALLED_BY
            todo.append((child, methods | {child.name} if named else methods))
    return out


def _imports(path: Path, stage: str) -> set[str]:
    """The hitchhiker modules a file imports when ``stage`` runs it: all but those in the
    bodies of methods that CALLED_BY names for other stages."""
    out = set()
    for methods, modules in _imports_by_method(path).items():
        if all(stage in CALLED_BY[m] for m in methods):
            out |= modules
    return {m for m in out if m != "hitchhiker" and _path(m) is not None}


def files(stage: str, environment: str | None = None, objective: str | None = None) -> list[str]:
    """Source files of hitchhiker.stages.<stage> and of every hitchhiker module it imports, sorted;
    when it imports the environments, those of ``environment``'s module, and when it imports
    the objectives, ``objective``'s (each registry imports the configured one only, at run
    time). A stage that reads no train section never runs the objectives' code (config checks
    them only where a train section is given), so its inputs leave them out."""
    seen: set[Path] = set()
    todo = [f"hitchhiker.stages.{stage}"]
    environments = PACKAGE / "environments" / "__init__.py"
    objectives = PACKAGE / "training" / "objectives" / "__init__.py"
    registries = {  # a registry's file: the configured entry's module
        environments: _literal(environments, "ENVIRONMENTS").get(environment),
        objectives: _literal(objectives, "OBJECTIVES").get(objective),
    }
    trains = "train" in sections(stage)
    while todo:
        path = _path(todo.pop())
        if path is None or path in seen or (not trains and objectives.parent in path.parents):
            continue
        seen.add(path)
        todo.extend(_imports(path, stage))
        if registries.get(path):
            todo.append(registries[path])
    return sorted(map(str, seen))


def sections(stage: str) -> list[str]:
    """The SECTIONS list of hitchhiker.stages.<stage>."""
    found = _literal((PACKAGE / "stages" / stage).with_suffix(".py"), "SECTIONS")
    if found is None:
        raise KeyError(f"hitchhiker.stages.{stage} has no SECTIONS")
    return list(found)
