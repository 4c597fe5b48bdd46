"""MkDocs hook: before every build, write docs/cli.md from the CLI's own argparse help and redraw
the layer diagram of docs/architecture.md from the import contract and the package's imports.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _walk(parser: argparse.ArgumentParser, prefix: str, out: list[str]) -> None:
    out.append(f"## `{prefix}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _walk(sub, f"{prefix} {name}", out)


def render() -> str:
    """Markdown for every command and sub-command of ``scalefit``."""
    from scalefit.cli import build_parser

    out = [
        "# CLI reference\n",
        "Generated from the command line itself (`docs/hooks.py`) at every docs build.\n",
    ]
    _walk(build_parser(), "scalefit", out)
    return "\n".join(out)


def on_pre_build(config, **kwargs) -> None:  # noqa: ARG001 - MkDocs hook signature
    """Regenerate ``cli.md`` and the layer diagram (each rewritten only when it changed)."""
    path = Path(config["docs_dir"]) / "cli.md"
    text = render()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    write_architecture(Path(config["docs_dir"]) / "architecture.md")


#: Names of the layers of pyproject.toml's layers contract, bottom up (docs/architecture.md).
LAYER_NAMES = (
    "core",
    "laws and data",
    "producers",
    "fit",
    "evaluate",
    "decide",
    "plot",
    "workflows",
    "cli",
)
START = "<!-- layers:start (docs/hooks.py: architecture) -->"
END = "<!-- layers:end -->"


def architecture() -> str:
    """The layer diagram: the contract's layers, with the imports grimp reads from the package.

    One box per top-level module or package of ``scalefit`` inside its layer, one arrow per
    package importing another (arrows into core are left out: every layer uses it).
    """
    import re
    import tomllib

    import grimp

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"][::-1]
    assert len(layers) == len(LAYER_NAMES), "name the new layer in docs/hooks.py's LAYER_NAMES"
    members = [[m.strip() for m in re.split("[:|]", layer)] for layer in layers]
    where = {m: i for i, layer in enumerate(members) for m in layer}
    ids = {m: f"n{i}" for i, m in enumerate(sorted(where))}
    graph = grimp.build_graph("scalefit", cache_dir=None)
    arrows = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = (m.split(".")[1] if "." in m else None for m in (module, imported))
            if a and b and a != b and where[b] > 0:
                arrows.add((a, b))
    out = ["```mermaid", "flowchart BT"]
    for name, layer in zip(LAYER_NAMES, members, strict=True):
        out += [
            f'  subgraph {name.replace(" ", "_")}["{name}"]',
            *(f'    {ids[m]}["{m}"]' for m in layer),
            "  end",
        ]
    out += [f"  {ids[a]} --> {ids[b]}" for a, b in sorted(arrows)]
    return "\n".join([*out, "```"])


def write_architecture(page: Path) -> None:
    """Rewrite the diagram between ``START`` and ``END`` in ``page`` when it changed."""
    text = page.read_text()
    head, _, rest = text.partition(START)
    new = f"{head}{START}\n{architecture()}\n{END}{rest.partition(END)[2]}"
    if new != text:
        page.write_text(new)
