"""The ``read`` tool: text files with offset/limit and truncation notices, images as image blocks."""

from __future__ import annotations

import asyncio
import base64
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, Literal

from nexus.agent import MAX_BYTES, MAX_LINES, AgentTool, AgentToolResult, ToolUpdateFn, Truncation, format_size
from nexus.llm import AbortSignal, ImageContent, TextContent, UserContent
from nexus.tools._args import opt_int, req_str
from nexus.tools._specs import declare
from nexus.tools._workspace import ToolError, Workspace, refuse_hard_link

_BINARY_SNIFF = 8192
_CHUNK = 1024 * 1024
_BOM = b"\xef\xbb\xbf"
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Larger images are not sent: providers reject them (Anthropic's limit is 5 MB per image)."""


def image_mime(head: bytes) -> str | None:
    """The image MIME type from magic bytes (png, jpeg, gif, webp), else ``None``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _count_lines(fh: BinaryIO) -> int:
    """The line count ``text.split("\\n")`` gives minus a trailing empty line, in 1 MB chunks."""
    count, last = 0, b""
    while chunk := fh.read(_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (1 if last not in (b"", b"\n") else 0)


def _skip_lines(fh: BinaryIO, n: int) -> None:
    """Move ``fh`` to the start of line ``n`` (0-based) without holding more than a chunk."""
    while n > 0:
        at = fh.tell()
        chunk = fh.read(_CHUNK)
        if not chunk:
            return
        found = chunk.count(b"\n")
        if found < n:
            n -= found
            continue
        end = -1
        for _ in range(n):
            end = chunk.index(b"\n", end + 1)
        fh.seek(at + end + 1)
        return


def _next_line(fh: BinaryIO, cap: int) -> tuple[bytes, int]:
    """The next line's first ``cap`` bytes (without the newline) and its full length in bytes."""
    head = fh.readline(cap)
    if head.endswith(b"\n"):
        return head[:-1], len(head) - 1
    size = len(head)
    if size == cap:  # longer than the cap: count the rest without keeping it
        while part := fh.readline(_CHUNK):
            if part.endswith(b"\n"):
                size += len(part) - 1
                break
            size += len(part)
    return head, size


def _window(fh: BinaryIO, start: int, count: int) -> tuple[Truncation, int]:
    """The lines ``start .. start+count`` cut like :func:`truncate_head` would cut them, reading only what is shown.

    Returns the cut and the byte length of the first line (for the "line too long" notice).
    """
    kept: list[str] = []
    size = 0
    first_size = 0
    by_bytes = False
    for i in range(min(count, MAX_LINES)):
        raw, full = _next_line(fh, MAX_BYTES + 1)
        line = raw.decode("utf-8", "replace")
        if start == 0 and i == 0 and line.startswith("\ufeff"):
            line, full = line[1:], full - 3
        nbytes = len(line.encode("utf-8", "surrogatepass")) if full <= MAX_BYTES else full  # raw size past the cap
        if i == 0:
            first_size = nbytes
        cost = nbytes + (1 if kept else 0)
        if size + cost > MAX_BYTES:
            by_bytes = True
            break
        kept.append(line)
        size += cost
    truncated = by_bytes or count > MAX_LINES
    by: Literal["lines", "bytes"] | None = ("bytes" if by_bytes else "lines") if truncated else None
    first_too_long = by_bytes and not kept
    return Truncation("\n".join(kept), truncated, by, count, len(kept), first_too_long), first_size


def _read_text(fh: BinaryIO, shown: str, offset: int | None, limit: int | None) -> tuple[str, dict[str, Any]]:
    """A window of a text file; memory follows the window (≤ 50 KB shown), not the file."""
    fh.seek(0)
    total = _count_lines(fh)
    fh.seek(0)
    if total == 1 and fh.read(4) == _BOM:  # only a byte-order mark: an empty text
        total = 0
    start = (offset or 1) - 1
    if total == 0:
        return "(empty file)", {"total_lines": 0}
    if start >= total:
        raise ToolError(f"Offset {offset} is beyond end of file ({total} lines total) in {shown}.")
    end = total if limit is None else min(total, start + limit)
    fh.seek(0)
    _skip_lines(fh, start)
    trunc, first_size = _window(fh, start, end - start)
    details: dict[str, Any] = {"total_lines": total, "truncation": trunc.as_details()}
    first = start + 1
    if trunc.first_line_too_long:
        return (
            f"[Line {first} is {format_size(first_size)}, exceeds the {format_size(MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first}p' {shown} | head -c {MAX_BYTES}]"
        ), details
    out = trunc.content
    if trunc.truncated:
        last = start + trunc.output_lines
        why = f" ({format_size(MAX_BYTES)} limit)" if trunc.truncated_by == "bytes" else ""
        out += f"\n\n[Showing lines {first}-{last} of {total}{why}. Use offset={last + 1} to continue.]"
    elif end < total:
        out += f"\n\n[{total - end} more lines in file. Use offset={end + 1} to continue.]"
    return out, details


def _load(ws: Workspace, path: Path, raw: str, offset: int | None, limit: int | None) -> AgentToolResult:
    """Read what the call asks for: an image whole (≤ 5 MB), a text file's window line by line."""
    with ws.open_inside(path, raw) as fh:
        found = os.fstat(fh.fileno())  # of what was opened: a name swapped for a link meanwhile is seen too
        if not stat.S_ISREG(found.st_mode):
            raise ToolError(f"{raw} is not a regular file (a pipe, socket or device); it cannot be read.")
        refuse_hard_link(found, raw, "read", "read")
        head = fh.read(_BINARY_SNIFF)
        size = found.st_size
        mime = image_mime(head[:16])
        if mime is not None and size > MAX_IMAGE_BYTES:
            raise ToolError(
                f"Image {raw} is {format_size(size)}, over the {format_size(MAX_IMAGE_BYTES)} a model accepts. "
                "Make a smaller copy first (e.g. with bash: `convert in.png -resize 2000x2000 small.png`)."
            )
        if mime is not None:
            data = head + fh.read()
            note = f"Read image file {raw} [{mime}, {format_size(len(data))}]"
            blocks: list[UserContent] = [TextContent(note), ImageContent(base64.b64encode(data).decode(), mime)]
            return AgentToolResult(blocks, {"mime_type": mime, "bytes": len(data)})
        if b"\x00" in head:
            raise ToolError(
                f"{raw} looks like a binary file ({format_size(size)}); it is not shown. "
                "Use bash (e.g. `file`, `xxd | head`) to inspect it."
            )
        text, details = _read_text(fh, raw, offset, limit)
    return AgentToolResult.text(text, details=details)


def read_tool(ws: Workspace) -> AgentTool:
    """The ``read`` tool confined to ``ws``."""

    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        raw = req_str(args, "path", allow_empty=False)
        offset = opt_int(args, "offset", minimum=1)
        limit = opt_int(args, "limit", minimum=1)
        path = ws.resolve(raw)
        if not path.exists():
            raise ToolError(f"File not found: {raw} (looked in {path}).")
        if path.is_dir():
            raise ToolError(f"{raw} is a directory; use the ls tool to list it.")
        if not path.is_file():  # a FIFO or device would block the read forever
            raise ToolError(f"{raw} is not a regular file (a pipe, socket or device); it cannot be read.")
        return await asyncio.to_thread(_load, ws, path, raw, offset, limit)

    return declare("read", execute)
