"""The doc runner: every shell and Python block of README.md and the docs pages is executed.

Blocks run page by page, in order, in a temporary folder holding a copy of ``docs/examples/``:
shell blocks (```` ```bash ````, ``sh``, ``shell``, and unlabelled blocks whose first command is a
known program) with ``bash -e``; Python blocks in one namespace per page, so later blocks see
earlier ones. A block right after the line ``<!-- not run by the doc tests: REASON -->`` (blank
lines between at most) is skipped; the comment is for the page's editors and does not show on the
rendered page, which says in its own words what a block needs (a GPU, a public file). README.md
and the quickstart run by default; the other pages, the study pages of ``docs/studies/``
included, are marked ``slow``, and ``make test-docs`` (run by ``.ci/run``) runs every page.
Blocks of plain ``scalefit`` commands run through ``scalefit.cli.main`` in this process;
anything else runs in ``bash``. A block that installs, clones or runs ``make`` must be marked
skipped: the runner refuses to execute it.

**Quoted output.** A ```` ```text ```` block that directly follows a run block (nothing but blank
lines between them) is the output the page promises for it: every line of it must appear in what
the block printed (stdout and stderr), in the same order, with runs of spaces compared as one. A
line ``...`` stands for lines left out, and a line ending in `` ...`` matches a printed line that
starts with the text before it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from scalefit.core.errors import ConvergenceWarning

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
SKIP = re.compile(r"^\s*<!--\s*not run by the doc tests:\s*(\S.*?)\s*-->\s*$", re.IGNORECASE)
# The marker's former shape, a comment on the block's first line, showed on the rendered page:
# still honoured (never run such a block), and refused by test_no_block_carries_a_visible_marker.
VISIBLE_SKIP = re.compile(r"^\s*#\s*not run by the doc tests:\s*(\S.*)$", re.IGNORECASE)
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py"}
COMMANDS = ("scalefit", "python", "pip", "make", "torchrun", "git", "cd", "mkdocs")
# The default run executes the two pages a new user starts from; every other page's blocks run
# under `-m slow` (make test-slow, and make test-docs, which CI runs): together they take minutes.
DEFAULT_PAGES = {"README.md", "quickstart.md"}
# Commands that install, clone or rebuild must never run from a test: such a block has to carry a
# skip comment (the runner fails, without running it, if one does not).
UNSAFE = re.compile(r"\b(pip3?|uv)\s+install\b|\bgit\s+clone\b|^\s*make\b|\bsudo\b", re.M)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    kind: str  # "shell" or "python"
    code: str
    expected: str | None = None  # the ```text block quoted right after it, if any
    marker: str | None = None  # the reason of a skip marker right before the block, if any

    @property
    def visible_marker(self) -> str | None:
        first = self.code.strip().splitlines()[0] if self.code.strip() else ""
        match = VISIBLE_SKIP.match(first)
        return match.group(1).strip() if match else None

    @property
    def skip_reason(self) -> str | None:
        return self.marker or self.visible_marker


def blocks(path: Path) -> list[Block]:
    """The runnable fenced blocks of one Markdown page (top-level ``` fences only).

    A ```` ```text ```` block right after a runnable one (blank lines between at most) becomes
    that block's ``expected`` output.
    """
    out, lang, start, buf = [], None, 0, []
    closed = -1  # line number of the last runnable block's closing fence
    marker = None  # the reason of a skip marker waiting for its block
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if lang is None:
            if line.startswith("```"):
                lang, start, buf = line[3:].strip().lower(), number, []
            elif line.strip():
                closed = -1
                match = SKIP.match(line)
                marker = match.group(1) if match else None
            continue
        if line.startswith("```"):
            code = "\n".join(buf) + "\n"
            kind = _kind(lang, code)
            if kind:
                out.append(Block(path.name, start, kind, code, marker=marker))
                closed = number
            elif lang == "text" and closed > 0 and out:
                out[-1] = replace(out[-1], expected=code)
                closed = -1
            else:
                closed = -1
            lang, marker = None, None
            continue
        buf.append(line)
    return out


def _squash(line: str) -> str:
    return " ".join(line.split())


def check_output(expected: str, printed: str, where: str) -> None:
    """Fail unless every quoted line appears in ``printed``, in order (see the module docstring)."""
    lines = [_squash(ln) for ln in printed.splitlines()]
    at = 0
    for quoted in (_squash(ln) for ln in expected.splitlines()):
        if not quoted or quoted in ("...", "…"):
            continue
        prefix = quoted[:-3].rstrip() if quoted.endswith("...") else None
        for index in range(at, len(lines)):
            if lines[index] == quoted or (prefix and lines[index].startswith(prefix)):
                at = index + 1
                break
        else:
            raise AssertionError(
                f"{where}: the page quotes {quoted!r}, which the block did not print "
                f"(after the lines matched before it). It printed:\n{printed[-3000:]}"
            )


def _kind(lang: str, code: str) -> str | None:
    if lang in SHELL:
        return "shell"
    if lang in PYTHON:
        return "python"
    if lang == "":
        lines = [ln.strip() for ln in code.splitlines() if ln.strip()]
        if lines and (VISIBLE_SKIP.match(lines[0]) or lines[0].split()[0] in COMMANDS):
            return "shell"
    return None


def pages() -> list[Path]:
    docs = REPO / "docs"
    return [REPO / "README.md", *sorted(docs.glob("*.md")), *sorted(docs.glob("studies/*.md"))]


def _params():
    out = []
    for page in pages():
        found = blocks(page)
        if not found:
            continue
        marks = [] if page.name in DEFAULT_PAGES else [pytest.mark.slow]
        out.append(pytest.param(page, id=page.name, marks=marks))
    return out


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    env["SCALEFIT_CACHE_DIR"] = str(tmp / ".cache")
    shared = REPO.parent / "shared" / "data"
    if "SCALEFIT_DATA_DIR" not in env and shared.is_dir():
        env["SCALEFIT_DATA_DIR"] = str(shared)
    return env


def _commands(code: str) -> list[list[str]] | None:
    """The block as a list of ``scalefit`` argument lists, or None if it needs a real shell."""
    import shlex

    joined = code.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            return None
        if not words:
            continue
        if words[0] != "scalefit" or any(ch in line.split("#")[0] for ch in "|;&$<>`"):
            return None
        out.append(words[1:])
    return out


def _in_process(code: str, where: str) -> str | None:
    """Run a block of plain ``scalefit`` commands through ``scalefit.cli.main`` in this process.

    It is the same entry point the console script calls, minus a fresh interpreter (and a fresh
    JAX compilation) per command, which would cost the default test run minutes. Returns what
    the commands printed (stdout and stderr), or None if the block needs a real shell.
    """
    from scalefit.cli import main

    commands = _commands(code)
    if commands is None:
        return None
    printed = io.StringIO()
    for argv in commands:
        shown = warnings.showwarning
        start = printed.tell()
        try:
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                try:
                    code_ = main(argv)
                except SystemExit as exc:
                    code_ = exc.code
        finally:
            warnings.showwarning = shown
        assert code_ in (0, None), (
            f"{where}: scalefit {' '.join(argv)} -> {code_}: {printed.getvalue()[start:]}"
        )
    return printed.getvalue()


def _needs_chinchilla(code: str) -> bool:
    # `scalefit demo` falls back to a bundled table by itself; other uses need the public table
    uses = re.search(r"\bchinchilla(_epoch)?\b", code)
    return bool(uses) and not re.search(r"^\s*scalefit demo\b", code, re.M)


def _has_chinchilla(env: dict[str, str]) -> bool:
    folder = env.get("SCALEFIT_DATA_DIR")
    return bool(folder) and (Path(folder) / "chinchilla_depth_width.csv").exists()


@pytest.mark.parametrize("page", _params())
def test_page_blocks_run(page: Path, tmp_path, monkeypatch):
    """Run every block of one page in order; report the first failure with its line number."""
    work = tmp_path / "work"
    if EXAMPLES.is_dir():
        shutil.copytree(EXAMPLES, work)
    else:
        work.mkdir()
    env = _env(tmp_path)
    monkeypatch.chdir(work)
    for key in ("MPLBACKEND", "SCALEFIT_CACHE_DIR", "SCALEFIT_DATA_DIR"):
        if key in env:
            monkeypatch.setenv(key, env[key])
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for block in blocks(page):
        where = f"{page.name}:{block.line}"
        if block.skip_reason:
            continue
        assert not UNSAFE.search(block.code), (
            f"{where}: installs, clones or runs make; put the line "
            f"'<!-- not run by the doc tests: REASON -->' right before the block"
        )
        if _needs_chinchilla(block.code) and not _has_chinchilla(env):
            continue  # the public tables are not redistributed; CI provides them
        if block.kind == "shell":
            printed = _in_process(block.code, where)
            if printed is None:
                proc = subprocess.run(
                    ["bash", "-e", "-o", "pipefail", "-c", block.code],
                    cwd=work,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                printed = proc.stdout
                assert proc.returncode == 0, f"{where} exit {proc.returncode}:\n{printed[-3000:]}"
        else:
            code = compile(block.code, where, "exec")
            out = io.StringIO()
            # A reader sees scalefit's own warnings about the data (a ConvergenceWarning) as
            # warnings; everything else still fails the test (warnings are errors here).
            with warnings.catch_warnings(), contextlib.redirect_stdout(out):
                warnings.filterwarnings("default", category=ConvergenceWarning)
                exec(code, namespace)  # noqa: S102 - the project's own documentation
            printed = out.getvalue()
        if block.expected is not None:
            check_output(block.expected, printed, where)
        ran += 1
    assert ran or all(b.skip_reason for b in blocks(page))


def test_parser_finds_blocks_and_skip_reasons(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "text\n```bash\necho hi\n```\n```python\nx = 1\n```\n"
        "<!-- not run by the doc tests: needs a GPU -->\n\n"
        "```bash\nscalefit train run x.toml\n```\n"
        "```text\nnot code\n```\n```toml\na = 1\n```\n"
        "<!-- not run by the doc tests: taken by the text block -->\n```text\nx\n```\n"
        "<!-- not run by the doc tests: prose between -->\nprose\n```bash\necho a\n```\n"
        "```\n# not run by the doc tests: the former, visible marker\nscalefit train x\n```\n"
    )
    found = blocks(page)
    assert [(b.kind, b.line) for b in found] == [
        ("shell", 2),
        ("python", 5),
        ("shell", 10),
        ("shell", 25),
        ("shell", 28),
    ]
    assert [b.skip_reason for b in found] == [
        None,
        None,
        "needs a GPU",
        None,
        "the former, visible marker",
    ]


def test_every_skip_marker_says_why():
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if "not run by the doc tests" in line.lower() and line.lstrip().startswith("<!--"):
                assert SKIP.match(line), f"{page.name}:{number}: '<!-- ...: REASON -->' on one line"


def test_no_block_carries_a_visible_marker():
    """The skip marker is an HTML comment before the block, never a line the reader sees."""
    bad = [
        f"{page.relative_to(REPO)}:{block.line}"
        for page in pages()
        for block in blocks(page)
        if block.visible_marker
    ]
    assert not bad, (
        f"move the '# not run by the doc tests: REASON' line out of these blocks, as "
        f"'<!-- not run by the doc tests: REASON -->' right before the fence: {bad}"
    )


def test_no_block_installs_clones_or_runs_make_unmarked():
    """Checked for every page in the default run, without executing anything."""
    bad = [
        f"{page.name}:{block.line}"
        for page in pages()
        for block in blocks(page)
        if not block.skip_reason and UNSAFE.search(block.code)
    ]
    assert not bad, f"put '<!-- not run by the doc tests: REASON -->' before these blocks: {bad}"


def test_quoted_output_is_attached_and_compared(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```bash\necho a\n```\n\n```text\na\n```\n"
        "```bash\necho b\n```\nprose\n```text\nnot output\n```\n"
    )
    found = blocks(page)
    assert [b.expected for b in found] == ["a\n", None]
    printed = "converged  yes; 236/256 starts\nnoise\nwarning  draws correlate at -0.993\n"
    check_output("converged yes; 236/256 starts\n...\nwarning draws correlate ...\n", printed, "p")
    with pytest.raises(AssertionError, match="the page quotes 'converged no'"):
        check_output("converged no\n", printed, "p")
    with pytest.raises(AssertionError, match="did not print"):  # order matters
        check_output("warning draws correlate ...\nconverged yes; 236/256 starts\n", printed, "p")
