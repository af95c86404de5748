"""The ``read`` tool: text files with offset/limit and truncation notices, images as image blocks."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from nexus.agent.tool_types import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.llm.abort import AbortSignal
from nexus.llm.types import ImageContent, TextContent, UserContent
from nexus.tools._args import opt_int, req_str
from nexus.tools._truncate import MAX_BYTES, MAX_LINES, format_size, truncate_head
from nexus.tools._workspace import ToolError, Workspace

DESCRIPTION = (
    f"Read the contents of a file. Supports text files and images (png, jpeg, gif, webp). Text output is "
    f"truncated to {MAX_LINES} lines or {MAX_BYTES // 1024}KB (whichever comes first); use offset/limit for "
    "large files and keep reading with offset until you have what you need."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
        "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
        "limit": {"type": "number", "description": "Maximum number of lines to read"},
    },
    "required": ["path"],
}

_BINARY_SNIFF = 8192
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


def _read_text(data: bytes, shown: str, offset: int | None, limit: int | None) -> tuple[str, dict[str, Any]]:
    text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    start = (offset or 1) - 1
    if total == 0:
        return "(empty file)", {"total_lines": 0}
    if start >= total:
        raise ToolError(f"Offset {offset} is beyond end of file ({total} lines total) in {shown}.")
    end = total if limit is None else min(total, start + limit)
    trunc = truncate_head("\n".join(lines[start:end]))
    details: dict[str, Any] = {"total_lines": total, "truncation": trunc.as_details()}
    first = start + 1
    if trunc.first_line_too_long:
        size = format_size(len(lines[start].encode("utf-8")))
        return (
            f"[Line {first} is {size}, exceeds the {format_size(MAX_BYTES)} limit. "
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
        data = await asyncio.to_thread(Path.read_bytes, path)
        mime = image_mime(data[:16])
        if mime is not None and len(data) > MAX_IMAGE_BYTES:
            raise ToolError(
                f"Image {raw} is {format_size(len(data))}, over the {format_size(MAX_IMAGE_BYTES)} a model accepts. "
                "Make a smaller copy first (e.g. with bash: `convert in.png -resize 2000x2000 small.png`)."
            )
        if mime is not None:
            note = f"Read image file {raw} [{mime}, {format_size(len(data))}]"
            blocks: list[UserContent] = [TextContent(note), ImageContent(base64.b64encode(data).decode(), mime)]
            return AgentToolResult(blocks, {"mime_type": mime, "bytes": len(data)})
        if b"\x00" in data[:_BINARY_SNIFF]:
            raise ToolError(
                f"{raw} looks like a binary file ({format_size(len(data))}); it is not shown. "
                "Use bash (e.g. `file`, `xxd | head`) to inspect it."
            )
        text, details = _read_text(data, raw, offset, limit)
        return AgentToolResult.text(text, details=details)

    return AgentTool("read", DESCRIPTION, PARAMETERS, execute, label="Read")
