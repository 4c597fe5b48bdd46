"""Issue 28, item 4: no function in the package is over 80 lines of code without a reason.

The docstring does not count. A function may stay longer only when its docstring has a line
starting ``Length:`` that says why (a flat list of command-line options, say).
"""

from __future__ import annotations

import ast
from pathlib import Path

import scalefit

LIMIT = 80
PACKAGE = Path(scalefit.__file__).parent


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from ``def`` to the function's end, less its docstring."""
    total = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            total -= first.end_lineno - first.lineno + 1
    return total


def has_reason(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    doc = ast.get_docstring(node) or ""
    return any(line.strip().startswith("Length:") for line in doc.splitlines())


def long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = code_lines(node)
                if n > LIMIT and not has_reason(node):
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)"
                    )
    return found


def test_no_long_function_without_a_reason():
    assert long_functions(PACKAGE) == []


def test_the_check_sees_a_long_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (pkg / "long.py").write_text(f'def f():\n    """Doc."""\n{body}\n', encoding="utf-8")
    (pkg / "ok.py").write_text(
        f'def g():\n    """Doc.\n\n    Length: a flat table.\n    """\n{body}\n', encoding="utf-8"
    )
    found = long_functions(pkg)
    assert len(found) == 1 and "long.py" in found[0] and "(81 lines)" in found[0]
