"""Public sweeps kept outside the repository: find their folder and check every file's sha256."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from scalefit.core.errors import ScaleFitError


def verified_folder(given: str | None, env: str, sha256: dict[str, str], what: str) -> Path:
    """The folder ``given``, else ``$env``, holding every file of ``sha256`` as published.

    Raises a one-line :class:`ScaleFitError` when no folder is named, a file is missing or a
    file's sha256 differs from the published one.
    """
    folder = given or os.environ.get(env)
    if not folder:
        raise ScaleFitError(f"name the {what} folder (argument or ${env}).")
    folder = Path(folder)
    for name, digest in sha256.items():
        path = folder / name
        if not path.is_file():
            raise ScaleFitError(f"{path}: not found; expected the {what} file {name}.")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise ScaleFitError(f"{path}: sha256 differs from the published file's {digest}.")
    return folder


def run(main) -> None:
    """Run a study's ``main``; a :class:`ScaleFitError` is one line on stderr and exit 2."""
    try:
        main()
    except ScaleFitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
