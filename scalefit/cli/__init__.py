"""The ``scalefit`` command line.

Each sub-module of :mod:`scalefit.cli` that defines ``register(subparsers)`` adds its commands;
``main`` discovers them, so a feature's commands live beside each other and nothing else changes.
Errors of type :class:`~scalefit.errors.ScaleFitError` become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from collections.abc import Sequence

from ..errors import MissingExtraError, ScaleFitError

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NOT_CONVERGED = 3


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every discovered sub-command."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="scalefit",
        description="Fit, understand and act on neural scaling laws (width, depth and data).",
    )
    parser.add_argument("--version", action="version", version=f"scalefit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print warnings as one line (``scalefit: warning: ...``), not with source context."""
    print(f"scalefit: warning: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used by the console script)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        code = args.func(args)
    except (ScaleFitError, MissingExtraError, FileNotFoundError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"scalefit: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("scalefit: interrupted", file=sys.stderr)
        return 130
    return EXIT_OK if code is None else int(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
