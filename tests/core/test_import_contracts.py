"""The layer contracts of pyproject.toml, run by import-linter itself: kept by the package, broken
by a planted upward import; and the architecture page shows the diagram drawn from them."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(package_parent: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the repository's contracts on the ``scalefit`` under a folder."""
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    cmd = [str(LINT), "--no-cache", "--no-logo", str(REPO / "pyproject.toml")]
    return subprocess.run(cmd, cwd=package_parent, env=env, capture_output=True, text=True)


def test_the_package_keeps_its_contracts():
    run = _lint(REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 kept, 0 broken" in run.stdout


def test_a_planted_upward_import_and_an_unplaced_module_break_the_contracts(tmp_path):
    shutil.copytree(
        REPO / "scalefit", tmp_path / "scalefit", ignore=shutil.ignore_patterns("__pycache__")
    )
    errors = tmp_path / "scalefit" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _planted():\n    from scalefit import cli\n")
    (tmp_path / "scalefit" / "stray.py").write_text("")
    run = _lint(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "scalefit.core is not allowed to import scalefit.cli" in run.stdout
    assert "- scalefit.core.errors -> scalefit.cli (l." in run.stdout  # the planted line, by number
    assert "- scalefit.stray" in run.stdout  # a module in no layer (so the copy is what ran)
    assert "2 broken" in run.stdout  # the layers and the no-cycle contracts


def test_the_architecture_page_shows_the_diagram_drawn_from_the_contract():
    spec = importlib.util.spec_from_file_location("hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    diagram = hooks.architecture()
    assert diagram.startswith("```mermaid") and 'subgraph producers["producers"]' in diagram
    page = (REPO / "docs" / "architecture.md").read_text()
    # Stale after moving code: `mkdocs build` redraws it (docs/hooks.py, write_architecture).
    assert f"{hooks.START}\n{diagram}\n{hooks.END}" in page
