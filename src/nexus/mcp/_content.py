"""An MCP tool result as the model sees it: text, images, resources, structured content, errors.

- text blocks stay text; images stay images (providers pass them to models that take them);
  audio is named, not sent (no provider takes audio in a tool result);
- an embedded resource becomes its text under a ``[resource <uri>]`` line, or an image when it
  is one; other binary resources and resource links are named with their URI so the model can
  ask for them;
- ``structuredContent`` is added as JSON text when the result has no text at all (the spec asks
  servers to send a text form too; when they do, the model reads that), and is kept in
  ``details`` for UIs and the ledger;
- ``isError`` makes the result an error result: the model reads it and can try something else;
- text over 2,000 lines or 50 KB (the coding tools' limits) is cut, saying so; so are images over
  5 MB (as ``read`` does).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from nexus.agent import MAX_BYTES, MAX_LINES, AgentToolResult, format_size, truncate_head
from nexus.llm import ImageContent, TextContent, UserContent

if TYPE_CHECKING:
    from mcp.types import CallToolResult

MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Larger images are named instead of sent (the ``read`` tool's limit)."""

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_DETAILS_JSON_CHARS = 50_000


def to_tool_result(result: CallToolResult, server: str, tool: str) -> AgentToolResult:
    """``result`` mapped for the model (see the module docstring)."""
    blocks: list[UserContent] = []
    for item in result.content:
        blocks.extend(_block(item))
    details: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
    structured = result.structured_content
    if structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
        if not any(isinstance(b, TextContent) for b in blocks):
            blocks.append(TextContent(text))
        if len(text) <= _DETAILS_JSON_CHARS:
            details["structured_content"] = structured
    if not blocks:
        blocks.append(TextContent("(the tool returned no content)"))
    blocks, notice = _limit(blocks)
    if notice:
        details["truncated"] = True
    return AgentToolResult(blocks, details, is_error=bool(result.is_error))


def _block(item: Any) -> list[UserContent]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return [TextContent(item.text)]
    if kind == "image":
        return [_image(item.data, item.mime_type, "image")]
    if kind == "audio":
        return [TextContent(f"[audio ({item.mime_type}, {format_size(_b64_size(item.data))}) not shown]")]
    if kind == "resource":
        return _resource(item.resource)
    if kind == "resource_link":
        about = f": {item.description}" if getattr(item, "description", None) else ""
        mime = f" ({item.mime_type})" if getattr(item, "mime_type", None) else ""
        return [TextContent(f"[resource link {item.name} <{item.uri}>{mime}{about}]")]
    return [TextContent(f"[content of type {kind!r} not shown]")]


def _resource(resource: Any) -> list[UserContent]:
    uri = str(resource.uri)
    mime = getattr(resource, "mime_type", None) or ""
    text = getattr(resource, "text", None)
    if text is not None:
        return [TextContent(f"[resource {uri}{f' ({mime})' if mime else ''}]\n{text}")]
    blob = getattr(resource, "blob", "") or ""
    if mime in _IMAGE_TYPES:
        return [_image(blob, mime, f"resource {uri}")]
    return [TextContent(f"[binary resource {uri} ({mime or 'no type'}, {format_size(_b64_size(blob))}) not shown]")]


def _image(data: str, mime: str, what: str) -> UserContent:
    size = _b64_size(data)
    if mime not in _IMAGE_TYPES:
        return TextContent(f"[{what} of type {mime} ({format_size(size)}) not shown: not PNG, JPEG, GIF or WebP]")
    if size > MAX_IMAGE_BYTES:
        return TextContent(
            f"[{what} ({mime}, {format_size(size)}) not shown: over the {format_size(MAX_IMAGE_BYTES)} limit]"
        )
    return ImageContent(data, mime)


def _b64_size(data: str) -> int:
    return len(data) * 3 // 4


def _limit(blocks: list[UserContent]) -> tuple[list[UserContent], str]:
    """The blocks within the text limits, and the notice added when something was cut ("" if not)."""
    texts = [b.text for b in blocks if isinstance(b, TextContent)]
    total_lines = sum(t.count("\n") + 1 for t in texts)
    if total_lines <= MAX_LINES and sum(_size(t) + 1 for t in texts) <= MAX_BYTES:
        return blocks, ""
    lines_left, bytes_left, shown = MAX_LINES, MAX_BYTES, 0
    kept: list[UserContent] = []
    for block in blocks:
        if not isinstance(block, TextContent):
            kept.append(block)  # images are not text: they stay where they were
            continue
        if lines_left <= 0 or bytes_left <= 0:
            continue
        cut = truncate_head(block.text, lines_left, bytes_left)
        text = cut.content if not cut.first_line_too_long else _head_bytes(block.text, bytes_left)
        if text:
            kept.append(TextContent(text))
            shown += text.count("\n") + 1
        lines_left -= max(cut.output_lines, 1)
        bytes_left -= _size(text) + 1
    notice = (
        f"[Output truncated: showing {shown} of {total_lines} lines ({MAX_LINES} lines / "
        f"{format_size(MAX_BYTES)} limit). Ask the tool for less: a narrower query, a smaller range or page.]"
    )
    kept.append(TextContent(notice))
    return kept, notice


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _head_bytes(text: str, limit: int) -> str:
    return text.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")
