"""MkDocs hook: write docs/cli.md from the CLI's own argparse help before every build."""

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
    """Regenerate ``cli.md`` (only rewritten when it changed, to keep `mkdocs serve` calm)."""
    path = Path(config["docs_dir"]) / "cli.md"
    text = render()
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
