"""The documentation is written for users: no page reads as a log of how it was developed.

Every Markdown page of ``docs/``, README.md and CHANGELOG.md is checked, prose only (fenced
blocks and inline code are left out): no work sessions, numbered rounds or passes of work, clock
times of when something was run, or who was lent a machine. The history of changes is
CHANGELOG.md's, told by version and change.

User pages (README.md and ``docs/*.md``) are a manual: no GPU model, load average, commit hash,
driver version or development machine in their prose. What was measured on which machine, at
which commit and load, belongs to the study pages (``docs/studies/*.md``) and the pages that
record measurements (``RECORDS``). No page, script or message of the package names the
developers' data folder beside the checkout: a user does not have it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# (pattern, what it catches). Case-insensitive; tuned against 'forward pass', 'pass 0' (an
# argument value), 'rounding', 'around' and 'round trip'.
FORBIDDEN = [
    (r"\bsessions?\b", "a work session"),
    (
        r"\b(first|second|third|fourth|fifth|sixth|previous|next|this|that) round\b",
        "a round of work",
    ),
    (r"\bround \d", "a numbered round of work"),
    (r"\b(first|second|third|fourth|fifth) pass\b", "a pass of work"),
    (r"\bpass(es)? [1-9]\b", "a numbered pass of work"),
    (r"\b\d{1,2}:\d{2}(:\d{2})?\b", "a clock time of when something was run"),
    (r"\blent to\b|\bwho ran\b", "who ran what"),
    (r"\b(this|that|last) (week|evening|morning|afternoon|night)\b|\bearlier in the day\b", "when"),
]
# Machine and build trivia, checked in the prose of user pages (case-insensitive).
TRIVIA = [
    (r"\b(H100|H200|A100|A10G?|V100|L4|RTX ?\d{4}|GeForce|Tesla [A-Z]?\d+|MI[23]\d0X?)\b", "a GPU"),
    (r"\bload average\b|\bload (of )?(about |≈ ?|~)?\d|\bunder a load\b", "the machine's load"),
    (
        r"\bcommits? (``|[0-9a-f]{7,40}\b)|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b",
        "a commit",
    ),
    (r"\bdrivers? (version )?\d|\bCUDA \d+\.\d|\+cu\d{3}\b|\bnvidia-smi\b", "a driver version"),
    (r"\bshared (\d-core )?(development )?(machine|CPU)\b", "the development machine"),
]
# Pages that record measurements, like the study pages: each figure names its machine and commit.
RECORDS = {"performance.md", "peers.md", "reproductions.md"}
SHARED = re.compile(r"shared/data|\.\./shared\b|\bshared/")
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """``text`` with fenced blocks and inline code blanked (line numbers kept)."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _INLINE.sub("``", text)


def findings(text: str) -> list[tuple[int, str, str]]:
    """(line number, matched words, what they are) for every forbidden phrase in ``text``."""
    out = []
    for number, line in enumerate(prose(text).splitlines(), start=1):
        for pattern, what in FORBIDDEN:
            for match in re.finditer(pattern, line, re.IGNORECASE):
                out.append((number, match.group(0), what))
    return out


def trivia(text: str) -> list[tuple[int, str, str]]:
    """(line number, matched words, what they are) for machine or build trivia in ``text``."""
    out = []
    for number, line in enumerate(prose(text).splitlines(), start=1):
        for pattern, what in TRIVIA:
            for match in re.finditer(pattern, line, re.IGNORECASE):
                out.append((number, match.group(0), what))
    return out


def pages() -> list[Path]:
    found = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
    # docs/cli.md is generated from the parser at every docs build
    return [p for p in found if p.exists() and p.name != "cli.md"]


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_page_speaks_to_users_not_of_its_development(page: Path):
    bad = findings(page.read_text(encoding="utf-8"))
    assert not bad, "\n".join(
        f"{page.relative_to(REPO)}:{n}: {words!r} ({what})" for n, words, what in bad
    )


def user_pages():
    found = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [
        pytest.param(page, id=page.name)
        for page in found
        if page.name != "cli.md" and page.name not in RECORDS
    ]


@pytest.mark.parametrize("page", user_pages())
def test_user_page_names_no_machine_load_commit_or_driver(page: Path):
    bad = trivia(page.read_text(encoding="utf-8"))
    assert not bad, "move to a study page (docs/studies/):\n" + "\n".join(
        f"{page.relative_to(REPO)}:{n}: {words!r} ({what})" for n, words, what in bad
    )


def test_the_trivia_check_catches_machines_and_spares_ordinary_words():
    log = (
        "It ran in 299 s on one NVIDIA H200 on 2026-11-27.\n"
        "on the shared 2-core machine, load average 4.8–5.8\n"
        "under a load of about three other fits\n"
        "measured at commit 9b60585\n"
        "the study script of 02e6153, torch 2.11.0+cu130, driver 570.86\n"
        "(commit `4adecfc`, 2026-11-25)\n"
    )
    assert {n for n, _, _ in trivia(log)} == {1, 2, 3, 4, 5, 6}
    fine = (
        "A loaded checkpoint; the load balancing of a sweep; 1e-3 and 3e14 FLOP.\n"
        "sha256 `cf343ffd…0651`; a decade of data; ≈ 10 min on 2 cores; `H100` in code.\n"
        "```text\nmeasured on an H100 at commit 9b60585\n```\n"
    )
    assert trivia(fine) == []


def _sources() -> list[Path]:
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    code = sorted((REPO / "scalefit").rglob("*.py")) + sorted((REPO / "docs").rglob("*.py"))
    return [p for p in docs + code if p.exists() and p.name != "cli.md"]


def test_no_page_script_or_message_names_the_developers_data_folder():
    """A user has no ``shared/data`` beside the checkout; pages say where a user gets the data."""
    bad = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()[:80]}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if SHARED.search(line)
    ]
    assert not bad, "\n".join(bad)


def test_the_check_catches_logs_and_spares_ordinary_words():
    log = (
        "Third round (session of 2026-11-22, 19:40–20:40 UTC).\n"
        "**Pass 2** on an H100 lent to the session.\n"
        "the final code of this session\n"
        "ran from 14:54 to about 16:42 UTC\n"
    )
    assert {n for n, _, _ in findings(log)} == {1, 2, 3, 4}
    fine = (
        "The forward pass dominates; pass 0 to turn it off. Exponents are never rounded;\n"
        "a JSON round trip; errors around 1e-9. Measured on 2026-11-22 at commit 9558940.\n"
        "```text\nsession 3 at 10:00\n```\n"
        "Inline code is not prose: `--round 2`.\n"
    )
    assert findings(fine) == []


def test_performance_page_is_one_short_section_per_benchmark():
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 300
    # every benchmark script that compares or measures something has its command on the page
    for script in sorted((REPO / "benchmarks").glob("bench_*.py")):
        assert f"benchmarks/{script.name}" in text or script.name in text, script.name


def test_curves_page_is_a_guide_and_its_studies_are_linked():
    text = (REPO / "docs" / "curves.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    for study in sorted((REPO / "docs" / "studies").glob("curves_*.md")):
        assert f"(studies/{study.name})" in text, study.name
        assert f"studies/{study.name}" in nav, study.name
