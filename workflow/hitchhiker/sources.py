"""What a stage is made of, read from its source without importing it (Snakemake parses the
workflow on every run and in every Slurm job; importing a stage would import torch).

:func:`files` is a stage module's file and every hitchhiker module it imports, transitively
(inside functions too, but not inside an environment's methods that base.CALLED_BY names
for other stages), so a rule reruns when any code it runs changes; of the environments,
only the configured one's modules. :func:`sections` is the
stage's SECTIONS, the config sections its rule passes it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def _path(module: str) -> Path | None:
    """The file of hitchhiker module ``module`` ("hitchhiker.environments.market"), if any."""
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


CALLED_BY: dict[str, tuple[str, ...]] = _literal(PACKAGE / "environments" / "base.py", "CALLED_BY")


def _nodes(tree: ast.Module, stage: str):
    """The nodes of ``tree`` that ``stage`` runs: all, but the bodies of methods named in
    CALLED_BY for other stages."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            called_by = CALLED_BY.get(getattr(child, "name", None)) if isinstance(node, ast.ClassDef) else None
            if isinstance(child, ast.FunctionDef) and called_by is not None and stage not in called_by:
                continue
            todo.append(child)


def _imports(path: Path, stage: str) -> set[str]:
    """The hitchhiker modules a file imports when ``stage`` runs it ("from hitchhiker.x
    import y" names x and x.y)."""
    out = set()
    for node in _nodes(_tree(path), stage):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("hitchhiker.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("hitchhiker"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m != "hitchhiker" and _path(m) is not None}


def files(stage: str, environment: str | None = None) -> list[str]:
    """Source files of hitchhiker.<stage> and of every hitchhiker module it imports, sorted;
    when it imports the environments, those of ``environment``'s module (the registry imports
    the configured one only, at run time)."""
    seen: set[Path] = set()
    todo = [f"hitchhiker.{stage}"]
    registry = PACKAGE / "environments" / "__init__.py"
    module = _literal(registry, "ENVIRONMENTS").get(environment)
    while todo:
        path = _path(todo.pop())
        if path is None or path in seen:
            continue
        seen.add(path)
        todo.extend(_imports(path, stage))
        if path == registry and module:
            todo.append(module)
    return sorted(map(str, seen))


def sections(stage: str) -> list[str]:
    """The SECTIONS list of hitchhiker.<stage>."""
    found = _literal((PACKAGE / stage).with_suffix(".py"), "SECTIONS")
    if found is None:
        raise KeyError(f"hitchhiker.{stage} has no SECTIONS")
    return list(found)
