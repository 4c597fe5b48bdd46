"""scalefit/fit reads top-down: no import cycles (lazy imports included), no private imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FIT = Path(__file__).resolve().parents[2] / "scalefit" / "fit"


def _imports() -> dict[str, set[tuple[str, str]]]:
    """module -> {(imported module, imported name)} for every ``from .x import y`` in scalefit/fit,
    at any depth of the file (function-level, i.e. lazy, imports included)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for path in FIT.glob("*.py"):
        mod = path.stem
        out[mod] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                target = (node.module or "").split(".")[0]
                for alias in node.names:
                    if target:
                        out[mod].add((target, alias.name))
                    else:  # from . import bayes_model
                        out[mod].add((alias.name, "*"))
    return out


def test_no_module_imports_another_modules_private_names():
    bad = [
        f"{mod} imports {name} from {target}"
        for mod, deps in _imports().items()
        for target, name in deps
        if name.startswith("_") and target != mod
    ]
    assert not bad, bad


@pytest.mark.slow  # in `make test-slow`: the default run stays under 10 minutes on 2 cores
def test_no_import_cycles_even_lazy():
    graph = {
        m: {t for t, _ in deps if t in _imports() and t != "__init__"}
        for m, deps in _imports().items()
    }
    graph.pop("__init__", None)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(
                    stack[stack.index(nxt) :] + [node, nxt] if nxt in stack else [node, nxt]
                )
                return True
            if state.get(nxt) is None and visit(nxt, stack + [node]):
                return True
        state[node] = 2
        return False

    for node in sorted(graph):
        if state.get(node) is None and visit(node, []):
            break
    assert not cycle, " -> ".join(cycle)
