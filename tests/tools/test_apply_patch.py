from __future__ import annotations

import os

import pytest

from nexus.tools import ToolError, Workspace, apply_patch_tool

from ._helpers import call, text_of


def put(ws: Workspace, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = ws.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def snapshot(ws: Workspace) -> dict[str, bytes]:
    return {p.relative_to(ws.root).as_posix(): p.read_bytes() for p in ws.root.rglob("*") if p.is_file()}


async def test_modify_create_delete_in_one_patch(ws: Workspace) -> None:
    put(ws, {"a.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n"})
    patch = (
        "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n"
        "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
        "diff --git a/new/b.txt b/new/b.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new/b.txt\n"
        "@@ -0,0 +1,2 @@\n+hello\n+world\n"
        "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-bye\n"
    )
    result = await call(apply_patch_tool(ws), patch=patch)
    assert snapshot(ws) == {"a.txt": b"one\nTWO\nthree\n", "new/b.txt": b"hello\nworld\n"}
    assert text_of(result) == "Applied patch:\nM a.txt\nA new/b.txt\nD gone.txt"


async def test_plain_diff_u_without_prefixes(ws: Workspace) -> None:
    put(ws, {"f.c": "int x;\nint y;\n"})
    patch = "--- f.c\t2024-01-01 00:00:00\n+++ f.c\t2024-01-02 00:00:00\n@@ -1,2 +1,2 @@\n int x;\n-int y;\n+long y;\n"
    await call(apply_patch_tool(ws), patch=patch)
    assert (ws.root / "f.c").read_text() == "int x;\nlong y;\n"


async def test_offset_hunks_are_found(ws: Workspace) -> None:
    put(ws, {"f.txt": "".join(f"{i}\n" for i in range(1, 40))})
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -2,3 +2,3 @@\n 20\n-21\n+XXI\n 22\n@@ -30,3 +30,3 @@\n 34\n-35\n+XXXV\n 36\n"
    await call(apply_patch_tool(ws), patch=patch)
    lines = (ws.root / "f.txt").read_text().split("\n")
    assert lines[20] == "XXI" and lines[34] == "XXXV"


async def test_failed_hunk_changes_nothing(ws: Workspace) -> None:
    put(ws, {"a.txt": "a\nb\nc\n", "b.txt": "x\ny\nz\n"})
    before = snapshot(ws)
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1,3 +1,3 @@\n x\n-nope\n+N\n z\n"
    )
    with pytest.raises(ToolError) as info:
        await call(apply_patch_tool(ws), patch=patch)
    msg = str(info.value)
    assert "b.txt: hunk #1 (@@ -1,3 +1,3 @@) does not apply" in msg and "No files were changed" in msg
    assert "nope" in msg
    assert snapshot(ws) == before


async def test_no_newline_at_end_of_file(ws: Workspace) -> None:
    put(ws, {"n.txt": "a\nb"})
    patch = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    await call(apply_patch_tool(ws), patch=patch)
    assert (ws.root / "n.txt").read_bytes() == b"a\nb\n"


async def test_crlf_file_with_lf_patch(ws: Workspace) -> None:
    put(ws, {"w.txt": b"one\r\ntwo\r\nthree\r\n"})
    await call(apply_patch_tool(ws), patch="--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n")
    assert (ws.root / "w.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


async def test_rename_with_change_and_mode(ws: Workspace) -> None:
    put(ws, {"old.sh": "echo a\necho b\n"})
    patch = (
        "diff --git a/old.sh b/bin/new.sh\nold mode 100644\nnew mode 100755\nsimilarity index 80%\n"
        "rename from old.sh\nrename to bin/new.sh\n--- a/old.sh\n+++ b/bin/new.sh\n"
        "@@ -1,2 +1,2 @@\n echo a\n-echo b\n+echo c\n"
    )
    result = await call(apply_patch_tool(ws), patch=patch)
    assert snapshot(ws) == {"bin/new.sh": b"echo a\necho c\n"}
    assert os.access(ws.root / "bin/new.sh", os.X_OK)
    assert "R old.sh -> bin/new.sh" in text_of(result)


async def test_pure_rename_without_hunks(ws: Workspace) -> None:
    put(ws, {"a.txt": "same\n"})
    patch = "diff --git a/a.txt b/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to b.txt\n"
    await call(apply_patch_tool(ws), patch=patch)
    assert snapshot(ws) == {"b.txt": b"same\n"}


async def test_two_patches_to_same_file_apply_in_sequence(ws: Workspace) -> None:
    put(ws, {"s.txt": "1\n2\n3\n"})
    patch = (
        "--- a/s.txt\n+++ b/s.txt\n@@ -1 +1 @@\n-1\n+one\n--- a/s.txt\n+++ b/s.txt\n@@ -1,2 +1,2 @@\n one\n-2\n+two\n"
    )
    await call(apply_patch_tool(ws), patch=patch)
    assert (ws.root / "s.txt").read_text() == "one\ntwo\n3\n"


@pytest.mark.parametrize(
    ("files", "patch", "message"),
    [
        ({}, "hello there", "No file changes found"),
        ({"a.txt": "x\n"}, "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+y\n", "already exists"),
        ({}, "--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n", "does not exist"),
        ({"d.txt": "a\nb\n"}, "--- a/d.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", "does not remove all"),
        ({"b.bin": "x"}, "diff --git a/b.bin b/b.bin\nBinary files a/b.bin and b/b.bin differ\n", "binary"),
        (
            {"r.txt": "x\n", "t.txt": "y\n"},
            "diff --git a/r.txt b/t.txt\nrename from r.txt\nrename to t.txt\n",
            "exists",
        ),
    ],
)
async def test_bad_patches_are_refused(ws: Workspace, files: dict[str, str], patch: str, message: str) -> None:
    put(ws, dict(files))
    before = snapshot(ws)
    with pytest.raises(ToolError, match=message):
        await call(apply_patch_tool(ws), patch=patch)
    assert snapshot(ws) == before


async def test_missing_patch_argument(ws: Workspace) -> None:
    with pytest.raises(ToolError, match="'patch'"):
        await call(apply_patch_tool(ws))


async def test_wrong_hunk_counts_still_apply_whole_hunk(ws: Workspace) -> None:
    put(ws, {"w.txt": "a\nb\nc\nd\ne\n"})
    # header claims 3 old/new lines but the hunk has 5: the tail must not be silently dropped
    patch = "--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n d\n-e\n+E\n"
    await call(apply_patch_tool(ws), patch=patch)
    assert (ws.root / "w.txt").read_text() == "a\nB\nc\nd\nE\n"


async def test_format_patch_email_with_signature(ws: Workspace) -> None:
    put(ws, {"m.txt": "one\ntwo\n"})
    patch = (
        "From 123 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] change\n\n---\n m.txt | 2 +-\n\n"
        "diff --git a/m.txt b/m.txt\nindex 1..2 100644\n--- a/m.txt\n+++ b/m.txt\n"
        "@@ -1,2 +1,2 @@\n one\n-two\n+2\n-- \n2.39.0\n\n"
    )
    await call(apply_patch_tool(ws), patch=patch)
    assert (ws.root / "m.txt").read_text() == "one\n2\n"


async def test_form_feed_and_unicode_separators_are_not_line_breaks(ws: Workspace) -> None:
    put(ws, {"ff.py": "x = 1\n\x0c\ny = '\u2028'\n"})
    patch = "--- a/ff.py\n+++ b/ff.py\n@@ -1,3 +1,3 @@\n x = 1\n \x0c\n-y = '\u2028'\n+y = 2\n"
    await call(apply_patch_tool(ws), patch=patch)
    assert (ws.root / "ff.py").read_text() == "x = 1\n\x0c\ny = 2\n"


async def test_trailing_blank_lines_after_hunk_are_ignored(ws: Workspace) -> None:
    put(ws, {"t.txt": "a\nb\n"})
    await call(apply_patch_tool(ws), patch="--- a/t.txt\n+++ b/t.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\n\n")
    assert (ws.root / "t.txt").read_text() == "a\nc\n"


async def test_deleting_a_symlink_removes_the_link_not_its_target(ws: Workspace) -> None:
    put(ws, {"real.txt": "data\n"})
    (ws.root / "link.txt").symlink_to("real.txt")
    result = await call(apply_patch_tool(ws), patch="--- a/link.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-data\n")
    assert text_of(result) == "Applied patch:\nD link.txt"
    assert not (ws.root / "link.txt").is_symlink()
    assert (ws.root / "real.txt").read_text() == "data\n"
