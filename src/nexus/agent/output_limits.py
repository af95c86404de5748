"""Output limits shared by tools: 2,000 lines or 50 KiB, whichever comes first (pi's numbers).

The coding tools (`nexus.tools`) and MCP tools (`nexus.mcp`) cut what they send the model here.
"""

from __future__ import annotations

from typing import Literal

from nexus._dataclass import dataclass

MAX_LINES = 2000
MAX_BYTES = 50 * 1024
MAX_LINE_CHARS = 500


@dataclass(slots=True, frozen=True)
class Truncation:
    """What was kept of a text: ``content`` plus counts so notices can say how to see the rest."""

    content: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    output_lines: int
    first_line_too_long: bool = False

    def as_details(self) -> dict[str, object]:
        """A JSON-friendly summary for ``AgentToolResult.details``."""
        return {
            "truncated": self.truncated,
            "truncated_by": self.truncated_by,
            "total_lines": self.total_lines,
            "output_lines": self.output_lines,
        }


def format_size(n: int) -> str:
    """``512B`` / ``50.0KB`` / ``1.5MB`` for notices."""
    if n < 1024:
        return f"{n}B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f}KB"
    return f"{n / (1024 * 1024):.1f}MB"


def _nbytes(line: str) -> int:
    return len(line.encode("utf-8", "surrogatepass"))


def truncate_head(text: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Truncation:
    """Keep the start of ``text`` in whole lines (for file reads and search results)."""
    lines = text.split("\n")
    total = len(lines)
    if total <= max_lines and _nbytes(text) <= max_bytes:
        return Truncation(text, False, None, total, total)
    if _nbytes(lines[0]) > max_bytes:
        return Truncation("", True, "bytes", total, 0, first_line_too_long=True)
    kept: list[str] = []
    size = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in lines[:max_lines]:
        cost = _nbytes(line) + (1 if kept else 0)
        if size + cost > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        size += cost
    return Truncation("\n".join(kept), True, by, total, len(kept))


def truncate_tail(text: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Truncation:
    """Keep the end of ``text`` (for command output, where the last lines matter most).

    A single last line longer than ``max_bytes`` is cut to its final ``max_bytes`` bytes.
    """
    lines = text.split("\n")
    total = len(lines)
    if total <= max_lines and _nbytes(text) <= max_bytes:
        return Truncation(text, False, None, total, total)
    kept: list[str] = []
    size = 0
    by: Literal["lines", "bytes"] = "lines"
    for line in reversed(lines[-max_lines:]):
        cost = _nbytes(line) + (1 if kept else 0)
        if size + cost > max_bytes:
            by = "bytes"
            if not kept:
                tail = line.encode("utf-8", "surrogatepass")[-max_bytes:].decode("utf-8", "ignore")
                kept.append(tail)
            break
        kept.append(line)
        size += cost
    kept.reverse()
    return Truncation("\n".join(kept), True, by, total, len(kept))


def cap_line(line: str, max_chars: int = MAX_LINE_CHARS) -> tuple[str, bool]:
    """Cut one line to ``max_chars`` characters; returns (line, was_cut)."""
    if len(line) <= max_chars:
        return line, False
    return line[:max_chars] + "... [truncated]", True
