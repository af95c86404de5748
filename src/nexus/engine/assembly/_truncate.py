"""Cutting long tool output down to size without losing what the model most needs.

Keeps the head; when the tail looks important (errors, exit codes, totals, a closing
brace) keeps head and tail. Cuts snap to a nearby newline so lines are not torn.
"""

from __future__ import annotations

import re
from dataclasses import replace

from nexus._lazy import LazyPattern
from nexus.llm import TextContent, ToolResultMessage, UserContent

_IMPORTANT_TAIL = LazyPattern(r"error|exception|traceback|exit code|exit status|total|summary|failed", re.IGNORECASE)
_TAIL_MAX = 4_000
_SNAP = 0.2
_NOTICE_MAX = 400
"""The longest last line kept as a tool's own notice when the rest is cut."""
_MARKER_ROOM = 200
"""Room left for our marker, so that a cut result fits ``max_chars`` whole and cutting it again is a no-op."""


def _tail_is_important(text: str) -> bool:
    tail = text[-2_000:]
    return bool(_IMPORTANT_TAIL.search(tail)) or tail.rstrip().endswith("}")


def _snap_head(text: str, size: int) -> int:
    """End of the head: ``size``, moved back to a newline if one is within the last 20%."""
    cut = text.rfind("\n", int(size * (1 - _SNAP)), size)
    return cut if cut > 0 else size


def _snap_tail(text: str, size: int) -> int:
    """Start of a tail of about ``size`` chars, moved forward past a newline within its first 20%."""
    start = len(text) - size
    nl = text.find("\n", start, start + int(size * _SNAP))
    return nl + 1 if nl >= 0 else start


def _closing_notice(text: str) -> str:
    """A tool's own closing notice — its last line when that is one bracketed line (``[Showing lines 1-984 of
    3000. Use offset=985 to continue.]``, bash's saved-output path, an MCP server's ``[Output truncated: …]``)."""
    body = text.rstrip()
    line = body[body.rfind("\n") + 1 :]
    return line if len(line) <= _NOTICE_MAX and line.startswith("[") and line.endswith("]") else ""


def _head_marker(removed: int, lines: int, total: int) -> str:
    cut = f"the last {lines:,} lines ({removed:,} characters)" if lines > 1 else f"{removed:,} characters"
    return (
        f"\n\n[... truncated {cut} of {total:,}. The output was too long; "
        "request a smaller part (e.g. offset/limit or a narrower command) to see the rest.]"
    )


def truncate_text(text: str, max_chars: int) -> tuple[str, int]:
    """``text`` cut to at most ``max_chars`` characters, marker included; returns (text, chars removed).

    Cutting what was cut changes nothing (the result fits), and a tool's own closing notice survives the
    cut: a long result was cut three times (by the tool, the run's cap, then every view of the history),
    each cut taking the previous one's notice, so the model never learnt how to see the rest.
    """
    if max_chars < 0:
        raise ValueError(f"max_chars must be zero or more, got {max_chars}")
    if len(text) <= max_chars:
        return text, 0
    if _tail_is_important(text) and max_chars >= 100:
        tail_size = min(int(max_chars * 0.3), _TAIL_MAX)
        tail_start = _snap_tail(text, tail_size)
        room = max_chars - (len(text) - tail_start) - _MARKER_ROOM
        head_end = _snap_head(text, max(room, 0))
        removed = tail_start - head_end
        marker = f"\n\n[... {removed:,} characters omitted from the middle; showing head and tail ...]\n\n"
        return text[:head_end] + marker + text[tail_start:], removed
    notice = _closing_notice(text) if max_chars >= 2 * _NOTICE_MAX else ""
    body = text.rstrip()[: -len(notice)].rstrip() if notice else text
    kept = "\n" + notice if notice else ""
    head_end = _snap_head(body, max(max_chars - _MARKER_ROOM - len(kept), 0))
    removed = len(body) - head_end
    marker = _head_marker(removed, body.count("\n", head_end) + 1, len(text))
    return text[:head_end] + marker + kept, removed


def truncate_content(content: list[UserContent], max_chars: int) -> tuple[list[UserContent], int]:
    """Content blocks with their text (all text blocks joined) cut to ``max_chars``; images kept."""
    texts = [b for b in content if isinstance(b, TextContent)]
    joined = "".join(b.text for b in texts)
    cut, removed = truncate_text(joined, max_chars)
    if removed == 0:
        return content, 0
    others = [b for b in content if not isinstance(b, TextContent)]
    return [TextContent(cut), *others], removed


def truncate_tool_message(message: ToolResultMessage, max_chars: int) -> ToolResultMessage:
    """A copy of ``message`` with its text cut to ``max_chars`` (the same object when short enough)."""
    content, removed = truncate_content(message.content, max_chars)
    if removed == 0:
        return message
    details = dict(message.details or {})
    details["truncated_chars"] = removed
    return replace(message, content=content, details=details)
