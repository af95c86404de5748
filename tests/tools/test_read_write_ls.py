from __future__ import annotations

import asyncio
import base64
import os

import pytest

from nexus.llm.types import ImageContent, TextContent
from nexus.tools import ToolError, Workspace, edit_tool, ls_tool, read_tool, write_tool

from ._helpers import call, text_of

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_read_whole_file(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("one\ntwo\nthree\n")
    result = await call(read_tool(ws), path="a.txt")
    assert text_of(result) == "one\ntwo\nthree"
    assert result.details is not None and result.details["total_lines"] == 3


async def test_read_offset_limit_and_continue_notice(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = text_of(await call(read_tool(ws), path="a.txt", offset=3, limit=2))
    assert text.startswith("line 3\nline 4\n")
    assert "[6 more lines in file. Use offset=5 to continue.]" in text
    assert text_of(await call(read_tool(ws), path="a.txt", offset=10)) == "line 10"


async def test_read_truncates_at_2000_lines(ws: Workspace) -> None:
    (ws.root / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 3001)))
    text = text_of(await call(read_tool(ws), path="big.txt"))
    assert text.split("\n")[1999] == "2000"
    assert "[Showing lines 1-2000 of 3000. Use offset=2001 to continue.]" in text
    rest = text_of(await call(read_tool(ws), path="big.txt", offset=2001))
    assert rest.startswith("2001\n") and rest.endswith("3000")


async def test_read_truncates_at_50_kib(ws: Workspace) -> None:
    (ws.root / "wide.txt").write_text("".join("x" * 99 + "\n" for _ in range(1000)))
    text = text_of(await call(read_tool(ws), path="wide.txt"))
    shown = text.split("\n\n[")[0].split("\n")
    assert len(shown) == 512  # 512 * 100 bytes fits 50 KiB, 513 does not
    assert "[Showing lines 1-512 of 1000 (50.0KB limit). Use offset=513 to continue.]" in text


async def test_read_single_huge_line_suggests_sed(ws: Workspace) -> None:
    (ws.root / "min.js").write_text("a" * 60_000 + "\nb\n")
    text = text_of(await call(read_tool(ws), path="min.js"))
    assert "exceeds the 50.0KB limit" in text and "sed -n '1p'" in text


async def test_read_errors(ws: Workspace) -> None:
    (ws.root / "a.txt").write_text("x\n")
    (ws.root / "d").mkdir()
    with pytest.raises(ToolError, match="beyond end of file"):
        await call(read_tool(ws), path="a.txt", offset=5)
    with pytest.raises(ToolError, match=r"File not found: nope\.txt"):
        await call(read_tool(ws), path="nope.txt")
    with pytest.raises(ToolError, match="directory"):
        await call(read_tool(ws), path="d")
    with pytest.raises(ToolError, match="'offset' must be >= 1"):
        await call(read_tool(ws), path="a.txt", offset=0)
    with pytest.raises(ToolError, match="'limit' must be an integer"):
        await call(read_tool(ws), path="a.txt", limit="lots")
    with pytest.raises(ToolError, match="Missing required argument 'path'"):
        await call(read_tool(ws))


async def test_read_image_by_magic_bytes(ws: Workspace) -> None:
    (ws.root / "pic.dat").write_bytes(PNG)
    result = await call(read_tool(ws), path="pic.dat")
    images = [b for b in result.content if isinstance(b, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data) == PNG
    assert isinstance(result.content[0], TextContent) and "image/png" in result.content[0].text


@pytest.mark.parametrize(
    ("head", "mime"),
    [(b"\xff\xd8\xff\xe0", "image/jpeg"), (b"GIF89a", "image/gif"), (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp")],
)
async def test_read_other_image_types(ws: Workspace, head: bytes, mime: str) -> None:
    (ws.root / "img").write_bytes(head + b"\x00" * 32)
    result = await call(read_tool(ws), path="img")
    assert [b.mime_type for b in result.content if isinstance(b, ImageContent)] == [mime]


async def test_read_oversized_image_refused(ws: Workspace) -> None:
    (ws.root / "huge.png").write_bytes(PNG + b"\x00" * (5 * 1024 * 1024))
    with pytest.raises(ToolError, match=r"over the 5\.0MB a model accepts"):
        await call(read_tool(ws), path="huge.png")


async def test_read_binary_refused(ws: Workspace) -> None:
    (ws.root / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)))
    with pytest.raises(ToolError, match="binary file"):
        await call(read_tool(ws), path="blob.bin")


async def test_write_creates_parents_and_overwrites(ws: Workspace) -> None:
    result = await call(write_tool(ws), path="deep/er/f.txt", content="héllo\n")
    assert (ws.root / "deep/er/f.txt").read_text("utf-8") == "héllo\n"
    assert "7 bytes" in text_of(result) and result.details == {"path": "deep/er/f.txt", "bytes": 7}
    await call(write_tool(ws), path="deep/er/f.txt", content="")
    assert (ws.root / "deep/er/f.txt").read_bytes() == b""


async def test_write_bad_args(ws: Workspace) -> None:
    with pytest.raises(ToolError, match="'content' must be a string"):
        await call(write_tool(ws), path="f.txt", content=42)
    (ws.root / "d").mkdir()
    with pytest.raises(ToolError, match="directory"):
        await call(write_tool(ws), path="d", content="x")
    assert not (ws.root / "f.txt").exists()


async def test_ls_sorted_dirs_dotfiles(ws: Workspace) -> None:
    for name in ["b.txt", "A.txt", ".env", "c"]:
        (ws.root / name).write_text("")
    (ws.root / "Zdir").mkdir()
    (ws.root / "adir").mkdir()
    text = text_of(await call(ls_tool(ws)))
    assert text.split("\n") == [".env", "A.txt", "adir/", "b.txt", "c", "Zdir/"]


async def test_ls_empty_limit_and_errors(ws: Workspace) -> None:
    (ws.root / "empty").mkdir()
    assert text_of(await call(ls_tool(ws), path="empty")) == "(empty directory)"
    for i in range(5):
        (ws.root / f"f{i}").write_text("")
    text = text_of(await call(ls_tool(ws), limit=3))
    assert text.startswith("empty/\nf0\nf1\n\n[3 entries limit reached. Use limit=6 for more]")
    (ws.root / "file").write_text("")
    with pytest.raises(ToolError, match="Not a directory"):
        await call(ls_tool(ws), path="file")
    with pytest.raises(ToolError, match="Path not found"):
        await call(ls_tool(ws), path="nowhere")


async def test_read_and_edit_refuse_a_fifo_instead_of_blocking(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await asyncio.wait_for(call(read_tool(ws), path="pipe"), 5)
    with pytest.raises(ToolError, match="not a regular file"):
        await asyncio.wait_for(call(edit_tool(ws), path="pipe", oldText="a", newText="b"), 5)
