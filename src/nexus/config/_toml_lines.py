"""Find the line of a dotted key in TOML text, so config errors can say ``nexus.toml:12``.

``tomllib`` keeps no positions, so this scans the text: table headers (``[a.b]``,
``[[a.b]]`` with their array indexes) and ``key = value`` lines (dotted and quoted keys
included). It is a locator for error messages, not a parser: inside inline tables
and multi-line arrays it answers with the line of the enclosing key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nexus._lazy import LazyPattern

# Compiled on first use: loading a config imports this module for its nesting check, and scans for lines
# only to word an error.
_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER = LazyPattern(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEYVAL = LazyPattern(rf"^\s*({_DOTTED})\s*=")
_STRINGS = LazyPattern(r""""(?:[^"\\]|\\.)*"|'[^']*'""")

Loc = tuple[str | int, ...]


def _split_key(dotted: str) -> list[str]:
    parts = re.findall(_KEY_PART, dotted)
    out: list[str] = []
    for part in parts:
        if part[:1] in ('"', "'"):
            part = part[1:-1]
        out.append(part)
    return out


class _Scanner:
    def __init__(self) -> None:
        self.lines: dict[Loc, int] = {}
        self.arrays: dict[Loc, int] = {}
        self.table: Loc = ()

    def _resolve(self, parts: list[str], array_header: bool) -> Loc:
        resolved: Loc = ()
        for index, part in enumerate(parts):
            resolved = (*resolved, part)
            last = index == len(parts) - 1
            if resolved in self.arrays and not (last and array_header):
                resolved = (*resolved, self.arrays[resolved])
        if array_header:
            self.arrays[resolved] = self.arrays.get(resolved, -1) + 1
            resolved = (*resolved, self.arrays[resolved])
        return resolved

    def _record(self, loc: Loc, lineno: int) -> None:
        for cut in range(1, len(loc) + 1):
            self.lines.setdefault(loc[:cut], lineno)

    def header(self, bracket: str, dotted: str, lineno: int) -> None:
        self.table = self._resolve(_split_key(dotted), array_header=bracket == "[[")
        self._record(self.table, lineno)

    def key(self, dotted: str, lineno: int) -> None:
        self._record((*self.table, *_split_key(dotted)), lineno)


def key_lines(text: str) -> dict[Loc, int]:
    """Map every table and key path found in ``text`` to its 1-based line (first occurrence)."""
    scanner = _Scanner()
    in_multiline: str | None = None
    bracket_depth = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if in_multiline is not None:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        if bracket_depth > 0:
            bracket_depth += _bracket_balance(line)
            continue
        header = _HEADER.match(line)
        if header:
            scanner.header(header.group(1), header.group(2), lineno)
            continue
        keyval = _KEYVAL.match(line)
        if keyval is None:
            continue
        scanner.key(keyval.group(1), lineno)
        value = line[keyval.end() :]
        for quote in ('"""', "'''"):
            if value.count(quote) % 2 == 1:
                in_multiline = quote
                break
        else:
            bracket_depth = max(0, _bracket_balance(value))
    return scanner.lines


def _bracket_balance(fragment: str) -> int:
    code = _STRINGS.sub("", fragment).split("#", 1)[0]
    return code.count("[") + code.count("{") - code.count("]") - code.count("}")


def line_of(lines: Mapping[Loc, int], loc: Loc) -> int | None:
    """The line of ``loc``, or of its nearest enclosing key/table that is in ``lines``."""
    for cut in range(len(loc), 0, -1):
        found = lines.get(loc[:cut])
        if found is not None:
            return found
    return None


def nesting_overflow_line(text: str, limit: int) -> int | None:
    """The 1-based line where ``[``/``{`` nesting (outside strings and comments) first exceeds ``limit``.

    A linear scan without recursion, so it is safe on input that would exhaust the
    recursion of a parser. Strings (basic, literal, multi-line) and comments are skipped.
    """
    depth, line, index, size = 0, 1, 0, len(text)
    while index < size:
        char = text[index]
        if char == "\n":
            line += 1
        elif char == "#":
            end = text.find("\n", index)
            index = size if end < 0 else end
            continue
        elif char in "\"'":
            end = _string_end(text, index)
            line += text.count("\n", index, end)
            index = end
            continue
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        elif char in "]}":
            depth = max(0, depth - 1)
        index += 1
    return None


def _string_end(text: str, start: int) -> int:
    """The index just past the string starting at ``start`` (or the end of the text if it is unterminated)."""
    quote = text[start]
    if text.startswith(quote * 3, start):
        end = text.find(quote * 3, start + 3)
        return len(text) if end < 0 else end + 3
    index = start + 1
    while index < len(text) and text[index] not in (quote, "\n"):
        index += 2 if quote == '"' and text[index] == "\\" else 1
    return index + 1
