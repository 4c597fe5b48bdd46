"""docs/reproduce.py --only regenerates the named sections and leaves the rest of the page alone.

The byte-for-byte check regenerates the real ``toy`` section (the cheapest: ≈ 10 s, 24 small
fits with 200 bootstrap resamples each) into a copy of docs/reproductions.md.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "reproductions.md"


def _module():
    spec = importlib.util.spec_from_file_location("reproduce", REPO / "docs" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(REPO / "docs" / "reproduce.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_page_has_every_section_once_in_order():
    rep = _module()
    head, blocks = rep.split_page(PAGE.read_text(encoding="utf-8"))
    assert head.startswith("# Reproductions\n")
    assert [name for name, _ in blocks] == rep.SECTIONS
    assert head + "".join(b for _, b in blocks) == PAGE.read_text(encoding="utf-8")


def test_split_page_round_trip_and_boundaries():
    rep = _module()
    text = "# T\n\nintro\n<!-- reproduce: a -->\n## A\nx\n\n<!-- reproduce: b -->\n## B\ny\n"
    head, blocks = rep.split_page(text)
    assert head == "# T\n\nintro\n"
    assert blocks == [
        ("a", "<!-- reproduce: a -->\n## A\nx\n\n"),
        ("b", "<!-- reproduce: b -->\n## B\ny\n"),
    ]
    assert rep.split_page("no markers\n") == ("no markers\n", [])


def test_unknown_section_is_refused_and_page_untouched(tmp_path):
    page = tmp_path / "page.md"
    shutil.copy(PAGE, page)
    before = page.read_bytes()
    res = _run("--only", "nonsense", "--out", str(page))
    assert res.returncode == 2
    assert "unknown section(s) nonsense" in res.stderr
    assert "Traceback" not in res.stderr
    assert page.read_bytes() == before


def test_page_without_the_section_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Reproductions\n\n<!-- reproduce: core -->\n## Least-squares fits\n")
    res = _run("--only", "toy", "--out", str(page))
    assert res.returncode == 2
    assert "no marked section toy" in res.stderr
    assert (
        page.read_text() == "# Reproductions\n\n<!-- reproduce: core -->\n## Least-squares fits\n"
    )


@pytest.mark.slow
def test_only_toy_rewrites_that_section_and_nothing_else(tmp_path):
    rep = _module()
    page = tmp_path / "page.md"
    # Start from the real page with the toy block replaced by a stale one, so the run must
    # rewrite it; every other block must come back byte for byte.
    head, blocks = rep.split_page(PAGE.read_text(encoding="utf-8"))
    stale = "<!-- reproduce: toy -->\n## Toy teacher–student model\n\nstale\n\n"
    page.write_text(head + "".join(stale if n == "toy" else b for n, b in blocks), "utf-8")
    res = _run("--only", "toy", "--out", str(page))
    assert res.returncode == 0, res.stderr
    new_head, new_blocks = rep.split_page(page.read_text(encoding="utf-8"))
    assert new_head == head
    assert [n for n, _ in new_blocks] == [n for n, _ in blocks]
    for (name, old), (_, new) in zip(blocks, new_blocks, strict=True):
        if name != "toy":
            assert new == old, f"section {name} changed"
    toy = dict(new_blocks)["toy"]
    assert "stale" not in toy
    assert "regenerated on its own (`python docs/reproduce.py --only toy`" in toy
    assert "These are the values recorded in toy/cpu_alpha.csv" in toy

    # the toy section on the real page is what the same code gives now (stamp and blank lines
    # aside: a full run writes no stamp)
    def content(block: str) -> list[str]:
        return [ln for ln in block.splitlines() if ln and not ln.startswith("*This section")]

    assert content(toy) == content(dict(blocks)["toy"])
