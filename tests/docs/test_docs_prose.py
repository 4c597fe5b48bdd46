"""The documentation is written for users: no page reads as a log of how it was developed.

Every Markdown page of ``docs/``, README.md and CHANGELOG.md is checked, prose only (fenced
blocks and inline code are left out): no work sessions, numbered rounds or passes of work, clock
times of when something was run, or who was lent a machine. A figure names the command, the
machine, its load and the commit that produced it; the history of changes is CHANGELOG.md's,
told by version and change.
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
