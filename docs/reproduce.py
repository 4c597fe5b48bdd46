"""Regenerate docs/reproductions.md from the current code.

    SCALEFIT_DATA_DIR=../shared/data python docs/reproduce.py [--only core,allocation,...]

Each section lives in ``docs/repro/<name>.py`` as ``section(data_dir) -> str`` and computes its
numbers when called. The page records the date, the commit and the software versions it ran with.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECTIONS = ["core", "bayes", "allocation", "toy", "trainer", "probes"]


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=HERE,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="comma-separated section names")
    ap.add_argument("--out", default=str(HERE / "reproductions.md"))
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    data_dir = os.environ.get("SCALEFIT_DATA_DIR", str(HERE.parent.parent / "shared" / "data"))
    names = args.only.split(",") if args.only else SECTIONS
    import jax
    import numpy as np

    import scalefit

    parts = [
        "# Reproductions\n",
        "Every number of ours on this page was computed by `python docs/reproduce.py` "
        f"(commit `{_commit()}`, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; scalefit "
        f"{scalefit.__version__}, JAX {jax.__version__}, NumPy {np.__version__}, Python "
        f"{platform.python_version()}). The paper's values are quoted from the papers. Each row "
        "names the command that reproduces ours.\n",
    ]
    for name in names:
        path = HERE / "repro" / f"{name}.py"
        if not path.exists():
            continue
        t0 = time.perf_counter()
        module = importlib.import_module(f"repro.{name}")
        parts.append(module.section(data_dir).rstrip() + "\n")
        print(f"section {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    from scalefit._io import atomic_write_text

    atomic_write_text(args.out, "\n".join(parts))
    if not args.only or "figures" in names:
        from repro import figures

        atomic_write_text(HERE / "gallery.md", figures.gallery(figures.make(data_dir)))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
