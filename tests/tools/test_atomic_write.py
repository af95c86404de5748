"""write/edit/apply_patch never destroy the existing file: a full disk or an oversized write leaves it whole.

Two kinds of "disk full": a real one (a 1 MB tmpfs; needs permission to mount, skipped otherwise)
and a portable one (``RLIMIT_FSIZE`` in a child process, which makes writes past the limit fail
with EFBIG exactly like a full disk makes them fail with ENOSPC).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.tools import ToolError, Workspace, apply_patch_tool, edit_tool, read_tool, write_tool

from ._helpers import call, text_of

ORIGINAL = b"".join(b"original line %05d\n" % i for i in range(10_000))  # ~190 KB


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".nexus-tmp"))


@pytest.fixture
def full_disk(tmpfs: Callable[[str], Path]) -> Path:
    """A 1 MB tmpfs mounted at a fresh directory, filled up to ~100 KB free; unmounted afterwards."""
    mnt = tmpfs("1m")
    ws = mnt / "ws"
    ws.mkdir()
    (ws / "f.txt").write_bytes(ORIGINAL)
    with open(mnt / "filler", "wb") as fh:  # leave ~100 KB free
        free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
        fh.write(b"\0" * max(0, free - 100 * 1024))
    return ws


async def test_write_on_a_full_disk_keeps_the_original(full_disk: Path) -> None:
    ws = Workspace(full_disk)
    with pytest.raises(ToolError) as info:
        await call(write_tool(ws), path="f.txt", content="x" * 3_000_000)
    assert "No space left on device (ENOSPC)" in str(info.value)
    assert "the original file is unchanged" in str(info.value)
    assert (full_disk / "f.txt").read_bytes() == ORIGINAL
    assert _leftovers(full_disk) == []


async def test_edit_on_a_full_disk_keeps_the_original(full_disk: Path) -> None:
    ws = Workspace(full_disk)
    with pytest.raises(ToolError, match=r"No space left on device.*original file is unchanged"):
        await call(edit_tool(ws), path="f.txt", oldText="original line 00042\n", newText="y" * 500_000 + "\n")
    assert (full_disk / "f.txt").read_bytes() == ORIGINAL
    assert _leftovers(full_disk) == []


async def test_apply_patch_on_a_full_disk_changes_no_file(full_disk: Path) -> None:
    ws = Workspace(full_disk)
    (full_disk / "small.txt").write_text("a\n")
    big = "".join(f"+{'z' * 100}\n" for _ in range(3000))
    patch = (
        "--- a/small.txt\n+++ b/small.txt\n@@ -1 +1 @@\n-a\n+b\n"
        f"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,3000 @@\n{big}"
    )
    with pytest.raises(ToolError, match=r"No space left on device.*no file was changed"):
        await call(apply_patch_tool(ws), patch=patch)
    assert (full_disk / "small.txt").read_text() == "a\n"
    assert not (full_disk / "new.txt").exists()
    assert _leftovers(full_disk) == []


_CHILD = textwrap.dedent(
    """
    import asyncio, json, resource, signal, sys
    from nexus.llm.abort import AbortSignal
    from nexus.tools import Workspace, edit_tool, write_tool

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit then fail with EFBIG
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    ws = Workspace(sys.argv[1])
    tool = write_tool(ws) if sys.argv[2] == "write" else edit_tool(ws)
    args = json.loads(sys.stdin.read())
    try:
        asyncio.run(tool.execute("c1", args, AbortSignal(), lambda _r: None))
        print(json.dumps({"error": None}))
    except Exception as exc:
        print(json.dumps({"error": str(exc)}))
    """
)


def _run_limited(ws: Path, tool: str, args: dict[str, str], limit: int) -> str | None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, str(ws), tool, str(limit)],
        input=json.dumps(args),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    error: str | None = json.loads(res.stdout)["error"]
    return error


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_oversized_write_under_a_file_size_limit_keeps_the_original(tmp_path: Path, tool: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_bytes(ORIGINAL)
    big = "q" * 1_000_000
    args = (
        {"path": "f.txt", "content": big}
        if tool == "write"
        else {"path": "f.txt", "oldText": "original line 00007\n", "newText": big}
    )
    error = _run_limited(ws, tool, args, limit=len(ORIGINAL) + 4096)
    assert error is not None and "File too large (EFBIG)" in error and "the original file is unchanged" in error
    assert (ws / "f.txt").read_bytes() == ORIGINAL
    assert _leftovers(ws) == []


def test_new_file_under_a_file_size_limit_is_not_created(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    error = _run_limited(ws, "write", {"path": "sub/new.txt", "content": "n" * 100_000}, limit=10_000)
    assert error is not None and "no file was created" in error
    assert not (ws / "sub" / "new.txt").exists() and _leftovers(ws / "sub") == []


async def test_write_and_edit_keep_mode(ws: Workspace) -> None:
    target = ws.root / "script.sh"
    target.write_text("echo one\n")
    target.chmod(0o750)
    await call(write_tool(ws), path="script.sh", content="echo two\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    await call(edit_tool(ws), path="script.sh", oldText="two", newText="three")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750 and target.read_text() == "echo three\n"
    assert _leftovers(ws.root) == []


async def test_new_file_gets_the_umask_mode(ws: Workspace) -> None:
    old = os.umask(0o027)
    try:
        await call(write_tool(ws), path="new.txt", content="hi\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((ws.root / "new.txt").stat().st_mode) == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root")
async def test_owner_is_kept_where_permitted(ws: Workspace) -> None:
    target = ws.root / "owned.txt"
    target.write_text("x\n")
    os.chown(target, 4321, 4321)
    await call(write_tool(ws), path="owned.txt", content="y\n")
    st = target.stat()
    assert (st.st_uid, st.st_gid) == (4321, 4321) and target.read_text() == "y\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write read-only files")
async def test_read_only_file_is_refused(ws: Workspace) -> None:
    target = ws.root / "ro.txt"
    target.write_text("keep\n")
    target.chmod(0o444)
    with pytest.raises(ToolError, match=r"read-only.*original file is unchanged"):
        await call(write_tool(ws), path="ro.txt", content="new\n")
    assert target.read_text() == "keep\n"


# --------------------------------------------------------------------------- hard links (issue 8, item 20)


@pytest.fixture
def linked(ws: Workspace, tmp_path: Path) -> Path:
    """``ws/inside.txt``: a hard link to ``tmp_path/outside.txt`` (outside the workspace)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    os.link(outside, ws.root / "inside.txt")
    return outside


async def test_edit_and_write_refuse_a_hard_linked_file(ws: Workspace, linked: Path) -> None:
    with pytest.raises(ToolError, match=r"inside\.txt has 2 hard links.*edit refuses"):
        await call(edit_tool(ws), path="inside.txt", oldText="1", newText="2")
    with pytest.raises(ToolError, match=r"inside\.txt has 2 hard links.*write refuses"):
        await call(write_tool(ws), path="inside.txt", content="pwned\n")
    patch = "--- a/inside.txt\n+++ b/inside.txt\n@@ -1 +1 @@\n-secret = 1\n+secret = 2\n"
    with pytest.raises(ToolError, match=r"inside\.txt has 2 hard links.*apply_patch refuses"):
        await call(apply_patch_tool(ws), patch=patch)
    assert await asyncio.to_thread(linked.read_text) == "secret = 1\n"
    assert (ws.root / "inside.txt").stat().st_nlink == 2


async def test_read_refuses_a_hard_linked_file_as_edit_does(ws: Workspace, linked: Path) -> None:
    """``read`` showed a file outside the workspace through a hard link planted inside it (issue 20, item 20)."""
    with pytest.raises(ToolError, match=r"inside\.txt has 2 hard links.*read refuses to read it.*cp -p inside\.txt"):
        await call(read_tool(ws), path="inside.txt")
    (ws.root / "own.txt").write_text("mine\n")
    assert text_of(await call(read_tool(ws), path="own.txt")) == "mine"
    os.unlink(linked)  # the other name gone: one name again, readable
    assert text_of(await call(read_tool(ws), path="inside.txt")) == "secret = 1"


async def test_write_never_replaces_a_pipe(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    with pytest.raises(ToolError, match=r"pipe is not a regular file .*write only changes files"):
        await call(write_tool(ws), path="pipe", content="x")
    assert stat.S_ISFIFO((ws.root / "pipe").stat().st_mode)


def _chattr(flag: str, path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("no chattr: the append-only test needs it")
    res = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"chattr {flag} is not permitted here ({res.stderr.strip()})")


@pytest.mark.parametrize("last", ["modified", "deleted"])
async def test_apply_patch_is_all_or_nothing_when_a_late_rename_is_refused(ws: Workspace, last: str) -> None:
    # b.txt is append-only: it can be staged but neither replaced nor deleted; a.txt, renamed first, must come back.
    (ws.root / "a.txt").write_text("alpha\n")
    (ws.root / "b.txt").write_text("beta\n")
    _chattr("+a", ws.root / "b.txt")
    second = (
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-beta\n+BETA\n"
        if last == "modified"
        else "--- a/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-beta\n"
    )
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-alpha\n+ALPHA\n" + second
    try:
        with pytest.raises(ToolError, match=r"Operation not permitted .*no file was changed"):
            await call(apply_patch_tool(ws), patch=patch)
    finally:
        _chattr("-a", ws.root / "b.txt")
    assert (ws.root / "a.txt").read_text() == "alpha\n"
    assert (ws.root / "b.txt").read_text() == "beta\n"
    assert sorted(p.name for p in ws.root.iterdir()) == ["a.txt", "b.txt"]  # no temporary, no backup left
