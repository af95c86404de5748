"""apply_patch on zero-context diffs (``git diff -U0``): line numbers are trusted, no end-of-file anchoring.

Found by cross-checking against ``git apply --unidiff-zero`` on this repository's own history:
a pure insertion without context used to be appended at the end of the file.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from nexus.tools import Workspace, apply_patch_tool

from ._helpers import call

BEFORE = "".join(f"line {i}\n" for i in range(1, 21))


async def test_zero_context_insertion_lands_at_its_line_number(ws: Workspace) -> None:
    (ws.root / "f.txt").write_text(BEFORE)
    patch = (
        "--- a/f.txt\n+++ b/f.txt\n"
        "@@ -3,0 +4,2 @@\n+new A\n+new B\n"  # insert after line 3 (not at the end of the file)
        "@@ -10 +11,0 @@\n-line 10\n"  # delete line 10
        "@@ -15,0 +16 @@\n+new C\n"
    )
    await call(apply_patch_tool(ws), patch=patch)
    lines = (ws.root / "f.txt").read_text().splitlines()
    assert lines[:6] == ["line 1", "line 2", "line 3", "new A", "new B", "line 4"]
    assert "line 10" not in lines
    assert lines[lines.index("line 15") + 1] == "new C"
    assert lines[-1] == "line 20"


async def test_zero_context_insertion_at_top(ws: Workspace) -> None:
    (ws.root / "f.txt").write_text(BEFORE)
    await call(apply_patch_tool(ws), patch="--- a/f.txt\n+++ b/f.txt\n@@ -0,0 +1 @@\n+first\n")
    assert (ws.root / "f.txt").read_text() == "first\n" + BEFORE


def _git_diff(tmp: Path, old: str, new: str, context: int) -> str:
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "f.txt").write_text(old)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "f.txt"], cwd=repo, check=True)
    (repo / "f.txt").write_text(new)
    out = subprocess.run(["git", "diff", f"-U{context}", "--", "f.txt"], cwd=repo, capture_output=True, check=True)
    return out.stdout.decode()


def _git_apply(root: Path, old: str, diff: str, context: int) -> str:
    root.mkdir()
    (root / "f.txt").write_text(old)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    flags = ["--unidiff-zero"] if context == 0 else []
    subprocess.run(["git", "apply", *flags, "-"], cwd=root, input=diff.encode(), check=True)
    return (root / "f.txt").read_text()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.parametrize("context", [0, 1, 3])
async def test_agrees_with_git_apply_on_generated_diffs(tmp_path: Path, context: int) -> None:
    old = "".join(f"{i % 7}\n" for i in range(60))  # repetitive lines: positions matter
    new_lines = old.splitlines(keepends=True)
    new_lines.insert(10, "inserted\n")
    del new_lines[30]
    new_lines[45] = "changed\n"
    new_lines.append("tail\n")
    new = "".join(new_lines)
    diff = await asyncio.to_thread(_git_diff, tmp_path, old, new, context)
    assert "@@" in diff
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "f.txt").write_text(old)
    await call(apply_patch_tool(Workspace(ours)), patch=diff)
    theirs = await asyncio.to_thread(_git_apply, tmp_path / "theirs", old, diff, context)
    assert (ours / "f.txt").read_text() == theirs == new
