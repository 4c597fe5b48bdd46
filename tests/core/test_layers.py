"""Imports go one way, down the layer map of scalefit._layers: every edge, parsed, not imported."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from textwrap import dedent

import pytest

from scalefit._layers import LAYERS, import_edges, layer_of, violations

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "scalefit"

#: A three-layer map for the planted packages below.
TOY_LAYERS = (
    ("core", ("pkg.core",)),
    ("producers", ("pkg.sim",)),
    ("fit", ("pkg.fit",)),
    ("plot", ("pkg.plot",)),
    ("api", ("pkg",)),
)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write a fake package ``pkg`` under ``tmp_path``: ``{relative path: source}``."""
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text))
    return root


def _check(root: Path, **kw) -> list[str]:
    return violations(root, layers=TOY_LAYERS, exceptions=kw.get("exceptions", {}),
                      cycles=kw.get("cycles", {}), apart=kw.get("apart", {}))  # fmt: skip


def test_scalefit_keeps_its_layers():
    assert violations(PACKAGE) == []


def test_the_architecture_page_shows_the_current_graph():
    spec = importlib.util.spec_from_file_location(
        "architecture_graph", REPO / "docs" / "architecture_graph.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    diagram = module.mermaid()
    assert diagram.startswith("```mermaid") and "-. exception .->" in diagram
    # Stale after moving code: run `python docs/architecture_graph.py`.
    assert diagram in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_every_scalefit_module_has_a_layer_and_the_map_names_real_modules():
    edges = import_edges(PACKAGE)
    assert len(edges) > 300  # the checker sees the package's imports at all
    names = {e.importer for e in edges}
    assert {layer_of(m) for m in names} == {name for name, _ in LAYERS}
    assert layer_of("scalefit.sim.model") == "producers"
    assert layer_of("scalefit.fit.compare") == "evaluate"  # the longer prefix wins
    assert layer_of("scalefit") == "api" and layer_of("scalefit.nothing") is None


def test_a_planted_function_level_upward_edge_is_reported_with_file_line_and_layers(tmp_path):
    root = _package(
        tmp_path,
        {
            "core.py": "X = 1\n",
            "fit/__init__.py": "",
            "fit/api.py": "from ..core import X\n",
            "sim/__init__.py": "",
            "sim/analysis.py": """\
                from ..core import X


                def depth_exponents(table):
                    from ..fit.api import X as fitted
                    return fitted
                """,
        },
    )
    found = _check(root)
    assert len(found) == 1
    assert found[0] == (
        f"{root / 'sim' / 'analysis.py'}:5: pkg.sim.analysis (layer producers) imports "
        "pkg.fit.api (layer fit, above)"
    )


@pytest.mark.parametrize(
    "source",
    [
        "from . import plot\n",  # a package __init__ re-export of a module
        "from .plot import draw\n",  # a name from a module
        "import pkg.plot\n",
        "import importlib\nM = importlib.import_module('pkg.plot')\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .plot import draw\n",
    ],
)
def test_every_kind_of_import_in_a_package_init_counts(tmp_path, source):
    root = _package(tmp_path, {"core.py": "", "plot.py": "def draw():\n    pass\n"})
    (root / "sim").mkdir()
    (root / "sim" / "__init__.py").write_text(source.replace("from .", "from .."))
    assert _check(root) == [
        f"{root / 'sim' / '__init__.py'}:{source.count(chr(10))}: pkg.sim (layer producers) "
        "imports pkg.plot (layer plot, above)"
    ]


def test_a_layer_set_apart_may_not_import_a_lower_one(tmp_path):
    root = _package(
        tmp_path,
        {"core.py": "", "sim.py": "from . import core\n", "fit.py": "from .sim import *\n"},
    )
    assert _check(root) == []  # fit sits above sim: allowed by order alone
    assert _check(root, apart={"fit": ("producers",)}) == [
        f"{root / 'fit.py'}:1: pkg.fit (layer fit) imports pkg.sim (layer producers, apart)"
    ]


def test_an_edge_down_or_sideways_is_allowed_and_an_unplaced_module_is_not(tmp_path):
    root = _package(
        tmp_path,
        {
            "core.py": "",
            "plot.py": "from .fit import a\nfrom .core import *\n",
            "fit/__init__.py": "",
            "fit/a.py": "from . import b\n",
            "fit/b.py": "from ..core import *\n",
            "extra.py": "",
        },
    )
    assert _check(root) == [f"{root / 'extra.py'}: module pkg.extra is in no layer of the map"]


def test_a_hidden_cycle_through_a_package_init_is_reported(tmp_path):
    # fit/__init__ re-exports api; api -> holdout -> (lazily) back through the package.
    files = {
        "core.py": "",
        "fit/__init__.py": "from .api import fit\n",
        "fit/api.py": "from .holdout import check\n\ndef fit():\n    pass\n",
        "fit/holdout.py": "def check():\n    from . import fit\n",
    }
    root = _package(tmp_path, files)
    cycle = frozenset({"pkg.fit", "pkg.fit.api", "pkg.fit.holdout"})
    assert _check(root) == [f"import cycle: {' <-> '.join(sorted(cycle))}"]
    assert _check(root, cycles={cycle: "planted"}) == []


def test_exceptions_are_named_and_stale_ones_are_reported(tmp_path):
    root = _package(
        tmp_path,
        {"core.py": "", "plot.py": "", "fit/__init__.py": "def f():\n    from .. import plot\n"},
    )
    edge = ("pkg.fit", "pkg.plot")
    assert len(_check(root)) == 1
    assert _check(root, exceptions={edge: "public method"}) == []
    (root / "fit" / "__init__.py").write_text("")
    assert _check(root, exceptions={edge: "public method"}) == [
        "stale layer exception pkg.fit -> pkg.plot"
    ]
