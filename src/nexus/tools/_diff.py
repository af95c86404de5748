"""Unified diffs of whole-file changes that stay fast on large files (only the changed window is diffed)."""

from __future__ import annotations

import difflib
import re

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")
_CHUNK = 1 << 16


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i : i + _CHUNK] == b[i : i + _CHUNK]:
        i += _CHUNK
    hi = min(n, i + _CHUNK)
    while i < hi and a[i] == b[i]:
        i += 1
    return min(i, n)


def _common_suffix(a: str, b: str, limit: int) -> int:
    n = min(len(a), len(b)) - limit
    i = 0
    while i + _CHUNK <= n and a[len(a) - i - _CHUNK : len(a) - i] == b[len(b) - i - _CHUNK : len(b) - i]:
        i += _CHUNK
    while i < n and a[len(a) - i - 1] == b[len(b) - i - 1]:
        i += 1
    return i


def _line_start_before(text: str, pos: int, lines_back: int) -> int:
    start = text.rfind("\n", 0, pos) + 1
    for _ in range(lines_back):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _line_end_after(text: str, pos: int, lines_fwd: int) -> int:
    end = pos
    for _ in range(lines_fwd + 1):
        nl = text.find("\n", end)
        if nl == -1:
            return len(text)
        end = nl + 1
    return end


def _lines(window: str) -> list[str]:
    """Lines with their ``\n`` kept, so a last line without one differs from the same line with one."""
    lines = [line + "\n" for line in window.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    return lines


def unified_diff(old: str, new: str, path: str, context: int = 3) -> tuple[str, int | None]:
    """(diff text, first changed line of the new file, 1-based); ``("", None)`` when equal."""
    if "\r" in old or "\r" in new:
        old = old.replace("\r\n", "\n")
        new = new.replace("\r\n", "\n")
    if old == new:
        return "", None
    p = _common_prefix(old, new)
    s = _common_suffix(old, new, p)
    start = _line_start_before(old, p, context)
    old_end = _line_end_after(old, len(old) - s, context)
    new_end = _line_end_after(new, len(new) - s, context)
    offset = old.count("\n", 0, start)
    first_changed = offset + old.count("\n", start, p) + 1
    a = _lines(old[start:old_end])
    b = _lines(new[start:new_end])
    out = [f"--- a/{path}", f"+++ b/{path}"]
    for line in difflib.unified_diff(a, b, n=context, lineterm=""):
        if line.startswith(("---", "+++")) and len(out) == 2:
            continue
        m = _HUNK.match(line)
        if m:
            out.append(
                f"@@ -{int(m.group(1)) + offset}{m.group(2) or ''} +{int(m.group(3)) + offset}{m.group(4) or ''} @@"
            )
        elif line.endswith("\n"):
            out.append(line[:-1])
        else:  # the file's last line has no line break: say so, as diff and git do
            out.append(line)
            out.append("\\ No newline at end of file")
    return "\n".join(out) + "\n", first_changed
