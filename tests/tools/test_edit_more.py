from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from nexus.llm.abort import AbortSignal
from nexus.tools import ToolError, Workspace, apply_patch_tool, edit_tool, write_tool
from nexus.tools._diff import unified_diff

from ._helpers import call

WORDS = ["alpha", "beta", "gamma", "delta", "", "    indented", "x = 1", "}"]


@pytest.mark.parametrize("seed", range(25))
async def test_edit_diff_applies_back_with_apply_patch(ws: Workspace, seed: int) -> None:
    """The diff ``edit`` reports is a real unified diff: applying it to the old file gives the new one."""
    rng = random.Random(seed)
    lines = [f"{rng.choice(WORDS)} {i}" for i in range(rng.randint(5, 60))]
    old = "\n".join(lines) + "\n"
    start = rng.randrange(len(lines))
    span = lines[start : start + rng.randint(1, 4)]
    new_block = [f"new {rng.randint(0, 9)}" for _ in range(rng.randint(0, 5))]
    (ws.root / "f.txt").write_text(old)
    old_text = "\n".join(span) + "\n"
    new_text = "\n".join(new_block) + ("\n" if new_block else "")
    result = await call(edit_tool(ws), path="f.txt", oldText=old_text, newText=new_text)
    expected = old.replace(old_text, new_text, 1)
    assert (ws.root / "f.txt").read_text() == expected
    assert result.details is not None
    old_lines, new_lines = old.split("\n"), expected.split("\n")
    first = next(
        (i for i, (x, y) in enumerate(zip(old_lines, new_lines, strict=False)) if x != y),
        min(len(old_lines), len(new_lines)),
    )
    assert result.details["first_changed_line"] == first + 1
    (ws.root / "f.txt").write_text(old)
    await call(apply_patch_tool(ws), patch=result.details["diff"])
    assert (ws.root / "f.txt").read_text() == expected


def test_diff_of_equal_texts_is_empty() -> None:
    assert unified_diff("a\n", "a\n", "f") == ("", None)
    assert unified_diff("a\r\nb\r\n", "a\nb\n", "f") == ("", None)


async def test_parallel_edits_on_one_file_both_land(ws: Workspace) -> None:
    (ws.root / "p.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    tool = edit_tool(ws)
    await asyncio.gather(
        *(call(tool, path="p.txt", oldText=f"line {i}\n", newText=f"LINE {i}\n") for i in range(0, 200, 20))
    )
    text = (ws.root / "p.txt").read_text()
    assert all(f"LINE {i}\n" in text for i in range(0, 200, 20))


async def test_fuzzy_on_crlf_file_keeps_crlf(ws: Workspace) -> None:
    (ws.root / "c.txt").write_bytes("a \u2013 b  \r\nc\r\n".encode())
    await call(edit_tool(ws), path="c.txt", oldText="a - b\nc", newText="A\nC")
    assert (ws.root / "c.txt").read_bytes() == b"A\r\nC\r\n"


async def test_aborted_write_leaves_nothing(ws: Workspace) -> None:
    signal = AbortSignal()
    signal.abort()
    with pytest.raises(ToolError, match="aborted"):
        await call(write_tool(ws), signal=signal, path="x.txt", content="data")
    assert not (ws.root / "x.txt").exists()


async def test_fuzzy_span_starting_at_line_break_in_crlf_file(ws: Workspace) -> None:
    (ws.root / "n.txt").write_bytes("first  \r\nsecond\u2019s\r\nthird\r\n".encode())
    await call(edit_tool(ws), path="n.txt", oldText="\nsecond's", newText="\nSECOND")
    assert (ws.root / "n.txt").read_bytes() == b"first\r\nSECOND\r\nthird\r\n"


@pytest.mark.parametrize(
    ("old", "old_text", "new_text"),
    [
        ("a\nb\nlast", "last", "LAST"),  # file without a final line break
        ("a\nb\nc\n", "c\n", "c"),  # the edit removes the final line break
        ("a\nb\nc", "c", "c\n"),  # the edit adds one
    ],
)
async def test_edit_diff_is_exact_about_the_final_line_break(
    ws: Workspace, old: str, old_text: str, new_text: str
) -> None:
    (ws.root / "f.txt").write_text(old)
    result = await call(edit_tool(ws), path="f.txt", oldText=old_text, newText=new_text)
    expected = old.replace(old_text, new_text, 1)
    assert result.details is not None
    diff = result.details["diff"]
    assert "@@" in diff and "\\ No newline at end of file" in diff
    (ws.root / "f.txt").write_text(old)
    await call(apply_patch_tool(ws), patch=diff)
    assert (ws.root / "f.txt").read_text() == expected
    if shutil.which("git") is not None:  # and git agrees the diff is exact
        (ws.root / "f.txt").write_text(old)
        await asyncio.to_thread(_git_apply, ws.root, diff)
        assert (ws.root / "f.txt").read_text() == expected


def _git_apply(root: Path, diff: str) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "apply", "-"], cwd=root, input=diff.encode(), check=True)
