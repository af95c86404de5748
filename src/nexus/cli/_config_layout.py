"""Blank lines around the tables a command adds to ``nexus.toml``, so an edited file stays tidy.

tomlkit keeps the user's text, but a table it inserts before an existing one is written with no blank
line after it (``enabled = true`` runs straight into ``[broker]``), and a table it replaces leaves its
old blank line beside the new one. This compares the file before and after the edit, line by line, and
touches only the lines the edit added: one blank line before each new table header and one after the
new lines when an existing line follows, no run of blank lines where the edit meets the file, and a
comment written directly above an existing header stays above it. Every line the user wrote but blank
ones at that seam is kept.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_HEADER = re.compile(r"\s*\[\[?[^\[\]=]+\]\]?\s*(?:#.*)?$")
_COMMENT = re.compile(r"\s*#")


def tidy_added_tables(before: str, after: str) -> str:
    """``after`` (``before`` edited) with blank lines set around the lines the edit added."""
    old = before.splitlines()
    new = after.splitlines(keepends=True)
    blank = "\r\n" if "\r\n" in before else "\n"
    out: list[str] = []
    pending: list[str] = []  # comment lines held back: they belong to the existing header below them
    matcher = SequenceMatcher(None, old, [line.rstrip("\r\n") for line in new], autojunk=False)
    for tag, _, _, start, end in matcher.get_opcodes():
        added = new[start:end]
        if tag == "equal":
            out.extend(pending)
            pending = []
            out.extend(added)
            continue
        if not any(_HEADER.match(line) for line in added):
            _extend_joining_blanks(out, added, new[end : end + 1])
            continue
        pending = _comments_above(out) if end < len(new) and _HEADER.match(new[end]) else []
        del out[len(out) - len(pending) :]
        _add_tables(out, _strip_blank_ends(added), blank)
        if end < len(new) and new[end].strip():
            out.append(blank)  # the new table ends, then the file's next line
        if pending:
            pending = [*pending[:-1], _with_newline(pending[-1], blank)]
    out.extend(pending)
    return "".join(out)


def _add_tables(out: list[str], lines: list[str], blank: str) -> None:
    if out and not out[-1].endswith("\n"):
        out[-1] += blank  # the file's last line had no newline
    for line in lines:
        if _HEADER.match(line) and out:
            while len(out) > 1 and not out[-1].strip() and not out[-2].strip():
                del out[-1]  # one blank line before the table, not the run the file ended with
            if out[-1].strip():
                out.append(blank)
        out.append(line.rstrip("\r\n") + blank if line.endswith("\n") else line)
    if out and not out[-1].endswith("\n"):
        out[-1] += blank


def _extend_joining_blanks(out: list[str], added: list[str], following: list[str]) -> None:
    """Added lines that hold no header (a key set in a table): drop blank lines doubling one beside them."""
    lines = list(added)
    if out and not out[-1].strip():
        while lines and not lines[0].strip():
            del lines[0]
    if following and not following[0].strip():
        while lines and not lines[-1].strip():
            del lines[-1]
    out.extend(lines)


def _comments_above(out: list[str]) -> list[str]:
    count = 0
    while count < len(out) and _COMMENT.match(out[len(out) - 1 - count]):
        count += 1
    return out[len(out) - count :]


def _strip_blank_ends(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _with_newline(line: str, blank: str) -> str:
    return line if line.endswith("\n") else line + blank
