"""Every document in docs/ (and the README) is one document: a single ``#`` title, no section twice.

docs/server.md once held two documents pasted together (two titles, ``[server]`` described twice);
a reader's table of contents, and links to a heading, then point at the wrong one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def _headings(path: Path) -> list[str]:
    """The Markdown headings outside fenced code blocks (where ``# comment`` lines are not headings)."""
    headings, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            headings.append(line.rstrip())
    return headings


@pytest.mark.parametrize("path", DOCS, ids=[path.name for path in DOCS])
def test_one_title_and_no_section_twice(path: Path) -> None:
    headings = _headings(path)
    titles = [h for h in headings if h.startswith("# ")]
    assert len(titles) == 1 and headings[0] == titles[0], titles
    repeated = [h for h, n in Counter(h for h in headings if h.startswith("## ")).items() if n > 1]
    assert repeated == []
