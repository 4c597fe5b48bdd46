"""Redraw the layer diagram of docs/architecture.md from the package's import edges.

    python docs/architecture_graph.py          # rewrite the block between the markers
    python docs/architecture_graph.py --check  # exit 1 when the page's block is out of date

The edges are read from the source by :func:`scalefit._layers.import_edges` (parsed, not
imported) and collapsed to the prefixes of the layer map (``fit``, ``fit.compare``, ``train``,
...); each is drawn inside its layer from :data:`scalefit._layers.LAYERS`. Edges into ``core`` are
left out (every layer uses it) and so are edges inside one prefix; an upward edge the map excepts
is dotted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE / "architecture.md"
START = "<!-- architecture-graph:start (python docs/architecture_graph.py) -->"
END = "<!-- architecture-graph:end -->"

sys.path.insert(0, str(HERE.parent))

from scalefit._io import atomic_write_text  # noqa: E402
from scalefit._layers import EXCEPTIONS, LAYERS, import_edges, placement  # noqa: E402


def _node(prefix: str) -> str:
    return prefix.replace("scalefit.", "").replace("scalefit", "scalefit (root)")


def mermaid() -> str:
    """The Mermaid flowchart: one subgraph per layer, one arrow per package-to-package import."""
    edges = import_edges(HERE.parent / "scalefit")
    units: dict[str, str] = {}  # map prefix -> layer
    arrows: dict[tuple[str, str], bool] = {}  # (from, to) -> an excepted upward edge
    for e in edges:
        (la, a), (lb, b) = placement(e.importer), placement(e.imported)
        units[a], units[b] = la, lb
        if a != b and lb != "core":
            arrows[a, b] = arrows.get((a, b), False) or (e.importer, e.imported) in EXCEPTIONS
    ids = {u: f"n{i}" for i, u in enumerate(sorted(units))}
    lines = ["```mermaid", "flowchart BT"]
    for layer, _ in LAYERS:
        members = sorted(u for u, lay in units.items() if lay == layer)
        lines.append(f'  subgraph {layer}["{layer}"]')
        lines += [f'    {ids[u]}["{_node(u)}"]' for u in members]
        lines.append("  end")
    for (a, b), excepted in sorted(arrows.items()):
        lines.append(f"  {ids[a]} {'-. exception .->' if excepted else '-->'} {ids[b]}")
    lines.append("```")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` compare) the block between the page's markers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    args = parser.parse_args(argv)
    text = PAGE.read_text(encoding="utf-8")
    head, sep, rest = text.partition(START)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        print(f"{PAGE}: markers {START!r} and {END!r} not found.", file=sys.stderr)
        return 2
    new = f"{head}{START}\n{mermaid()}\n{END}{tail}"
    if args.check:
        if new != text:
            print(f"{PAGE}: the diagram is out of date; run python docs/architecture_graph.py")
            return 1
        return 0
    if new != text:
        atomic_write_text(PAGE, new)
        print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
