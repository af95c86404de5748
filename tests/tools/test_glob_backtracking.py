"""Globs never backtrack catastrophically: find's patterns, grep's ``glob`` and ``.gitignore`` lines.

A glob is compiled to a regex, and ``*a*a*a*a*a*a*a*a*a*a*a*a*b`` as ``[^/]*a[^/]*a…`` tries
~C(40, 12) ways to split a 40-letter name. A ``.gitignore`` line is matched in ``nexus`` itself
(fd's results are filtered by it), so such a line in a workspace froze ``find`` past its time
limit, its abort and SIGTERM. The checks run in a child process so that a regression fails
(the child is killed) instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nexus.tools._walk import glob_match

SRC = Path(__file__).resolve().parents[2] / "src"
EVIL_GLOB = "*a" * 12 + "*b"
NAME = "a" * 40


def _run_child(code: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), str(workspace)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the glob match backtracked catastrophically (the child was killed after 60 s)")


@pytest.mark.parametrize("pure_python", ["0", "1"])
def test_a_catastrophic_gitignore_line_does_not_hang_find(tmp_path: Path, pure_python: str) -> None:
    (tmp_path / ".gitignore").write_text(EVIL_GLOB + "\n")
    (tmp_path / NAME).write_text("x\n")
    code = """
        import asyncio, sys
        from pathlib import Path
        from nexus.llm.abort import AbortSignal
        from nexus.tools import Workspace, find_tool
        tool = find_tool(Workspace(Path(sys.argv[1])), timeout=30)
        result = asyncio.run(tool.execute("c", {"pattern": "*"}, AbortSignal(), lambda _: None))
        print(result.content[0].text)
    """
    os.environ["NEXUS_PURE_PYTHON_SEARCH"] = pure_python
    try:
        res = _run_child(code, tmp_path)
    finally:
        del os.environ["NEXUS_PURE_PYTHON_SEARCH"]
    assert res.returncode == 0, res.stderr
    assert NAME in res.stdout.split()


@pytest.mark.parametrize(
    "pattern",
    [EVIL_GLOB, "**a" * 12 + "**b", "*[a]" * 12 + "*b", "*?" * 14 + "*b", "{x,*a*a*a*a*a*a*a*a*a*a*a*b}"],
)
def test_catastrophic_globs_answer_at_once(tmp_path: Path, pattern: str) -> None:
    code = f"""
        from nexus.tools._walk import glob_match
        print(glob_match({pattern!r}, {NAME!r}), glob_match({pattern!r}, {NAME + "b"!r}))
    """
    res = _run_child(code, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "True"]


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("*a*b", "xaxb", True),
        ("*a*b", "xa/xb", False),  # a name glob: '*' stays inside one part
        ("src/*a*b.py", "src/xa/b.py", False),
        ("src/*a*b.py", "src/xaab.py", True),
        ("x/**a**b", "x/ka/mb", True),
        ("**a**b", "xa/yb", False),  # no "/" in the pattern: the name alone
        ("*?a*", "aa", True),
        ("*?a*", "a", False),
        ("*[!x]*z", "a/z", False),  # a class that can match '/' keeps its backtracking, and its meaning
        ("*[!x]*z", "ayz", True),
        ("*.{py,txt}", "a.txt", True),
    ],
)
def test_the_rewritten_globs_mean_what_they_meant(pattern: str, name: str, matches: bool) -> None:
    assert glob_match(pattern, name) is matches
