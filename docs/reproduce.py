"""Regenerate docs/reproductions.md from the current code.

    SCALEFIT_DATA_DIR=/path/to/data python docs/reproduce.py                # the whole page
    SCALEFIT_DATA_DIR=/path/to/data python docs/reproduce.py --only toy     # one section

Each section lives in ``docs/repro/<name>.py`` as ``section(data_dir) -> str`` and computes its
numbers when called. On the page every section starts with a marker line
``<!-- reproduce: <name> -->``. A full run writes the header (commit, date, software versions)
and every section. ``--only a,b`` recomputes those sections and replaces their blocks in the
existing page, each with a line naming the commit and date it was regenerated at; the header and
every other section stay byte-for-byte as they were.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import platform
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECTIONS = ["core", "bayes", "allocation", "toy", "trainer", "probes"]
MARKER = "<!-- reproduce: {} -->"
_MARKER_RE = re.compile(r"^<!-- reproduce: ([a-z_]+) -->$", re.MULTILINE)


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


def _versions() -> str:
    import scalefit

    def ver(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return (
        f"scalefit {scalefit.__version__}, JAX {ver('jax')}, NumPy {ver('numpy')}, "
        f"Python {platform.python_version()}"
    )


class SectionError(RuntimeError):
    """A section's code raised; nothing is written."""


def split_page(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Split a page into its header and ``(name, block)`` pairs, in page order.

    Each block runs from its marker line up to the next marker (or the end), so joining the
    header and the blocks gives the page back exactly.
    """
    marks = list(_MARKER_RE.finditer(text))
    if not marks:
        return text, []
    head = text[: marks[0].start()]
    blocks = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        blocks.append((m.group(1), text[m.start() : end]))
    return head, blocks


def _render(name: str, data_dir: str, stamp: str | None) -> str:
    t0 = time.perf_counter()
    module = importlib.import_module(f"repro.{name}")
    try:
        body = module.section(data_dir).rstrip() + "\n"
    except Exception as exc:  # one line naming the section; the page is left as it was
        raise SectionError(f"section {name} failed: {type(exc).__name__}: {exc}") from exc
    print(f"section {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if stamp is not None:
        first, _, rest = body.partition("\n")  # keep the section's heading first
        body = f"{first}\n\n{stamp}{rest}"
    return MARKER.format(name) + "\n" + body + "\n"


def _end(text: str) -> str:
    """One newline at the end of the page (each block ends with a blank line)."""
    return text.rstrip("\n") + "\n"


def _only_stamp(name: str) -> str:
    return (
        f"*This section was regenerated on its own (`python docs/reproduce.py --only {name}`, "
        f"commit `{_commit()}`, {dt.datetime.now(dt.UTC):%Y-%m-%d}; {_versions()}); "
        "the commit and date at the top of the page are those of the last full run.*\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only", default=None, help="comma-separated section names: " + ",".join(SECTIONS)
    )
    ap.add_argument("--out", default=str(HERE / "reproductions.md"))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    data_dir = os.environ.get("SCALEFIT_DATA_DIR", str(HERE.parent.parent / "shared" / "data"))
    from scalefit.core._io import atomic_write_text

    out = Path(args.out)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in SECTIONS and n != "figures"]
        if unknown:
            print(
                f"reproduce.py: --only: unknown section(s) {', '.join(unknown)}; "
                f"expected names from {', '.join(SECTIONS)}, figures.",
                file=sys.stderr,
            )
            return 2
        page = [n for n in names if n in SECTIONS]
        if page:
            try:
                text = out.read_text(encoding="utf-8")
            except OSError as exc:
                print(
                    f"reproduce.py: --only needs an existing page at {out}: {exc}", file=sys.stderr
                )
                return 2
            head, blocks = split_page(text)
            missing = [n for n in page if n not in dict(blocks)]
            if missing:
                print(
                    f"reproduce.py: {out} has no marked section {', '.join(missing)}; run a full "
                    "regeneration (without --only) first.",
                    file=sys.stderr,
                )
                return 2
            new = {n: _render(n, data_dir, _only_stamp(n)) for n in page}
            atomic_write_text(out, _end(head + "".join(new.get(n, b) for n, b in blocks)))
            print(f"wrote {out} (sections {', '.join(page)}; the rest unchanged)", file=sys.stderr)
        if "figures" in names:
            from repro import figures

            atomic_write_text(HERE / "gallery.md", figures.gallery(figures.make(data_dir)))
            print(f"wrote {HERE / 'gallery.md'}", file=sys.stderr)
        return 0

    head = (
        "# Reproductions\n\n"
        "Every number of ours on this page was computed by `python docs/reproduce.py` "
        f"(commit `{_commit()}`, {dt.datetime.now(dt.UTC):%Y-%m-%d}; {_versions()}). "
        "The paper's values are quoted from the papers. Each row names the command that "
        "reproduces ours. A section regenerated on its own (`--only`) says so under its "
        "heading.\n\n"
    )
    blocks = [_render(n, data_dir, None) for n in SECTIONS]
    atomic_write_text(out, _end(head + "".join(blocks)))
    from repro import figures

    atomic_write_text(HERE / "gallery.md", figures.gallery(figures.make(data_dir)))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SectionError as exc:
        print(f"reproduce.py: {exc}; nothing written.", file=sys.stderr)
        sys.exit(1)
