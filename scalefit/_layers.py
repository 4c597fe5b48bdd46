"""The package's layers, as data, and a checker that reads import edges from the source.

A module may import modules of its own layer and of the layers below it, never of a layer above,
and never of a layer it stands apart from (:data:`APART`: the producers and the fitting layers do
not import each other). The layers, bottom up:

``core``
    Errors, option validation, atomic file I/O, the progress bar, read-only result mappings, run
    manifests, the table reader and the filter grammar, FLOP/parameter accounting, the one
    learning-rate schedule module (trainer and curves), the law
    catalogue, the bundled datasets, and the figure kit (``plot._base``, ``plot.style``: they
    import nothing from scalefit but each other, so the packages that draw their own figures can
    use them without reaching up to ``plot``).
``producers``
    ``sim``, ``train``, ``probes`` and ``sweep``: code that makes loss tables and measurements.
    They import ``core`` only, so they sit directly on it: being below ``fit`` keeps them off the
    fitter. The issue's map lists them after ``decide``, meaning that ``fit``, ``evaluate`` and
    ``decide`` do not import them either; :data:`APART` says so, so the two sides are siblings.
``fit``
    ``scalefit/fit``: the least-squares engine, checks, the result, bootstrap, priors, the
    Bayesian model and sampler, and the one hold-out (``fit.holdout``) with the research
    predictive it may score with (``experimental.discrepancy``, its own package). Both stay here
    although the issue's map puts the hold-out under ``evaluate``: ``fit(holdout=...)`` and
    ``fit_bayes`` call them, so moving them up would turn those calls into upward edges.
``evaluate``
    The extrapolation protocol (``experimental.extrapolation``; ``scalefit.validate`` is its
    deprecated alias) and model comparison (``fit.compare``: nothing in ``fit/`` imports it).
``decide``
    ``allocate``, ``isoflop`` and ``design``: what to train next, from a fitted law. Their own
    figure modules (``design.plot``, ``isoflop.plot``) live with them and use the core figure kit.
    ``curves`` (read training logs, fit schedule-aware laws, forecast) sits here too: it reads
    files like core but fits through ``fit``, so it belongs above it. The published IsoFLOP tables
    (``isoflop_data``) are data, in core, so ``datasets`` can load them.
``plot``
    The figures of fits, allocations, the toy and the trainer. It sits *below* ``workflows``
    (the issue's map lists it above): the workflows are the sweep → fit → figure glue and draw
    figures, so they must be allowed to import ``plot``.
``workflows``
    ``scalefit/workflows``: run a producer's output through a fit and draw the figures (the toy's
    depth exponents, the trainer grid's report).
``api``
    The package root ``scalefit/__init__.py`` alone: it re-exports the public names of ``fit``
    and ``allocate``, so a producer that imports ``scalefit`` imports the fitter.
``cli``
    ``scalefit/cli`` and ``scalefit/__main__``. The demo stays in ``cli/demo.py`` for now (moving
    it to ``workflows`` belongs to the CLI's own work).

An edge is every ``import`` and ``from ... import`` anywhere in a file (module level, inside
functions, under ``TYPE_CHECKING``, package ``__init__`` re-exports) and every
``importlib.import_module("...")`` call with a literal name. ``from pkg import name`` is an edge to
``pkg.name`` when that is a module, else to ``pkg``. Importing ``scalefit.x.y`` also runs the
parents' ``__init__`` files; those implicit edges are not counted (every module would then import
the root).

:data:`EXCEPTIONS` lists the upward edges that remain, each with its reason; :data:`CYCLES` the
import cycles that remain inside a layer. The checker reports an exception that no longer occurs,
so the lists only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Layers bottom up: (name, module prefixes). A module belongs to the layer of its longest
#: matching prefix (the module itself or a package above it); the bare root ``scalefit`` matches
#: only the root ``__init__``.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",
        (
            "scalefit.errors",
            "scalefit._validation",
            "scalefit._io",
            "scalefit._progress",
            "scalefit._readonly",
            "scalefit._manifest",
            "scalefit._torch",
            "scalefit._layers",
            "scalefit._version",
            "scalefit.accounting",
            "scalefit.table",
            "scalefit.expr",
            "scalefit.schedule",
            "scalefit.laws",
            "scalefit.datasets",
            "scalefit.isoflop_data",
            "scalefit.plot._base",
            "scalefit.plot.style",
        ),
    ),
    ("producers", ("scalefit.sim", "scalefit.train", "scalefit.probes", "scalefit.sweep")),
    ("fit", ("scalefit.fit", "scalefit.experimental.discrepancy")),
    ("evaluate", ("scalefit.validate", "scalefit.fit.compare", "scalefit.experimental")),
    ("decide", ("scalefit.allocate", "scalefit.isoflop", "scalefit.design", "scalefit.curves")),
    ("plot", ("scalefit.plot",)),
    ("workflows", ("scalefit.workflows",)),
    ("api", ("scalefit",)),
    ("cli", ("scalefit.cli", "scalefit.__main__")),
)

#: Layers that stand side by side although one is listed lower: ``layer -> layers below it that
#: it may not import``.
APART: dict[str, tuple[str, ...]] = {
    "fit": ("producers",),
    "evaluate": ("producers",),
    "decide": ("producers",),
}

#: Upward edges kept on purpose: ``(importer, imported) -> reason``.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("scalefit.fit.result", "scalefit.plot.fit"): (
        "FitResult.plot() is public API (a lazy call of scalefit.plot.fit.plot_fit); dropping "
        "the method needs a deprecation cycle."
    ),
}

#: Import cycles kept on purpose -> reason. A cycle is a set of modules, or of packages
#: (``scalefit.x``, a top-level module or subpackage with everything under it).
CYCLES: dict[frozenset[str], str] = {
    frozenset({"scalefit._io", "scalefit._manifest"}): (
        "_manifest writes through _io; _io's checkpoint loader verifies through _manifest (lazily)."
    ),
    frozenset({"scalefit.experimental", "scalefit.fit"}): (
        "the hold-out scores with the calibrated predictive when asked (the Bayesian hold-out's "
        "default), which refits by least squares through fit; fit.discrepancy is its alias "
        "until 0.2."
    ),
    frozenset({"scalefit.plot._base", "scalefit.plot.style"}): (
        "the figure kit: axes() styles through style, style reaches pyplot through _base (lazily)."
    ),
}


@dataclass(frozen=True)
class Edge:
    """One import: ``importer`` (a module) imports ``imported`` at ``path:line``."""

    importer: str
    imported: str
    path: Path
    line: int


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(root: str | Path) -> dict[str, Path]:
    """``{module name: file}`` for every ``.py`` file under the package folder ``root``."""
    root = Path(root)
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _targets(node: ast.AST, package: str, known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            yield sub if sub in known else module
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        yield node.args[0].value


def import_edges(root: str | Path) -> list[Edge]:
    """Every import edge between modules of the package at ``root`` (parsed, never imported).

    Parameters
    ----------
    root : path-like
        The package folder (its name is the top-level package name).

    Returns
    -------
    list of Edge
        Edges to modules of the same package only, self-imports dropped, in file order.
    """
    root = Path(root)
    known = modules(root)
    top = root.name
    out = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(node, package, known):
                if (target == top or target.startswith(top + ".")) and target != name:
                    out.append(Edge(name, target, path, node.lineno))
    return sorted(out, key=lambda e: (str(e.path), e.line, e.imported))


def placement(module: str, layers=LAYERS) -> tuple[str, str] | None:
    """``(layer, prefix)``: the longest prefix of the map that holds ``module``, or ``None``."""
    best = None
    for layer, prefixes in layers:
        for prefix in prefixes:
            root_only = "." not in prefix
            hit = module == prefix or (not root_only and module.startswith(prefix + "."))
            if hit and (best is None or len(prefix) > len(best[1])):
                best = (layer, prefix)
    return best


def layer_of(module: str, layers=LAYERS) -> str | None:
    """The layer a module belongs to (longest matching prefix), or ``None`` when unplaced."""
    found = placement(module, layers)
    return None if found is None else found[0]


def _rename(layers, top: str):
    """The layer map with the ``scalefit`` prefix replaced by ``top`` (for another root)."""
    if top == "scalefit":
        return layers
    swap = lambda p: top + p[len("scalefit") :] if p.split(".")[0] == "scalefit" else p  # noqa: E731
    return tuple((name, tuple(swap(p) for p in prefixes)) for name, prefixes in layers)


def violations(
    root: str | Path,
    *,
    layers=LAYERS,
    exceptions: dict[tuple[str, str], str] | None = None,
    cycles: dict[frozenset[str], str] | None = None,
    apart: dict[str, tuple[str, ...]] | None = None,
) -> list[str]:
    """Every breach of the layer map in the package at ``root``, one line each.

    Reports: a module no layer holds; an edge to a higher layer or to one its layer stands apart
    from (naming file, line and both layers) unless listed in ``exceptions``; an import cycle
    (between modules, or between packages) not listed in ``cycles``; and an exception or cycle
    entry that no longer occurs. Excepted edges take no part in cycles.

    Parameters
    ----------
    root : path-like
        The package folder, e.g. ``scalefit/``. Prefixes in ``layers`` starting with
        ``scalefit`` are read as the root's own name.
    layers, exceptions, cycles, apart
        The map (default: this module's :data:`LAYERS`, :data:`EXCEPTIONS`, :data:`CYCLES`,
        :data:`APART`).

    Returns
    -------
    list of str
        Empty when the package keeps to its layers.
    """
    root = Path(root)
    exceptions = EXCEPTIONS if exceptions is None else exceptions
    cycles = CYCLES if cycles is None else cycles
    apart = APART if apart is None else apart
    layers = _rename(layers, root.name)
    rank = {name: i for i, (name, _) in enumerate(layers)}
    out = [
        f"{path}: module {name} is in no layer of the map"
        for name, path in modules(root).items()
        if layer_of(name, layers) is None
    ]
    edges = import_edges(root)
    used = set()
    for e in edges:
        src, dst = layer_of(e.importer, layers), layer_of(e.imported, layers)
        if src is None or dst is None:
            continue
        if rank[dst] <= rank[src] and dst not in apart.get(src, ()):
            continue
        if (e.importer, e.imported) in exceptions:
            used.add((e.importer, e.imported))
            continue
        out.append(
            f"{e.path}:{e.line}: {e.importer} (layer {src}) imports {e.imported} "
            f"(layer {dst}, {'above' if rank[dst] > rank[src] else 'apart'})"
        )
    out += [f"stale layer exception {a} -> {b}" for a, b in exceptions if (a, b) not in used]
    kept = [e for e in edges if (e.importer, e.imported) not in exceptions]
    found = _cycles(kept) + _cycles(_package_edges(kept, root.name))
    for comp in found:
        if comp not in cycles:
            out.append(f"import cycle: {' <-> '.join(sorted(comp))}")
    out += [f"stale cycle exception {sorted(c)}" for c in cycles if c not in found]
    return out


def _package_edges(edges: list[Edge], top: str) -> list[Edge]:
    """The edges between packages (``top.x``), the root itself left out."""
    out = []
    for e in edges:
        a, b = (".".join(m.split(".")[:2]) for m in (e.importer, e.imported))
        if a != b and top not in (a, b):
            out.append(Edge(a, b, e.path, e.line))
    return out


def _cycles(edges: list[Edge]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.add(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found
