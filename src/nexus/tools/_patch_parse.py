"""Parsing unified diffs (plain ``diff -u`` and git-style, several files, create/delete/rename)."""

from __future__ import annotations

import re
from dataclasses import field

from nexus._dataclass import dataclass
from nexus.tools._workspace import ToolError

_HUNK = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+(.*)$")
DEV_NULL = "/dev/null"


@dataclass(slots=True)
class Hunk:
    """One ``@@`` block: ``lines`` are (op, text-with-EOL) with op in `` ``, ``-``, ``+``."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    header: str
    lines: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class FilePatch:
    """The changes to one file; ``old_path``/``new_path`` are ``None`` for created/deleted files."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)
    new_mode: str | None = None
    binary: bool = False
    git: bool = False

    @property
    def display(self) -> str:
        """The path to name in messages."""
        return self.new_path or self.old_path or "?"


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1").decode("utf-8", "replace")
    return name


def _header_path(rest: str) -> str | None:
    name = rest.split("\t", 1)[0].rstrip()
    name = _unquote(name)
    return None if name == DEV_NULL else name


def _strip_prefix(fp: FilePatch) -> None:
    paths = [p for p in (fp.old_path, fp.new_path) if p is not None]
    if fp.git or (paths and all(p.startswith(("a/", "b/")) for p in paths)):
        if fp.old_path is not None and fp.old_path.startswith("a/"):
            fp.old_path = fp.old_path[2:]
        if fp.new_path is not None and fp.new_path.startswith("b/"):
            fp.new_path = fp.new_path[2:]


def _git_names(rest: str) -> tuple[str, str]:
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.index('"', 1)
        return _unquote(rest[: end + 1]), _unquote(rest[end + 1 :])
    half = (len(rest) - 1) // 2
    if rest[half] == " " and rest[2:half] == rest[half + 3 :]:
        return rest[:half], rest[half + 1 :]
    a, _, b = rest.partition(" b/")
    return a, "b/" + b


def _is_header(lines: list[str], i: int) -> bool:
    line = lines[i]
    if line.startswith(("@@", "diff --git ")):
        return True
    return line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _blank(op: str, text: str) -> bool:
    """A blank context line, or the ``-- `` line that starts a git format-patch signature."""
    return (op == " " and not text.strip()) or (op == "-" and text in ("- \n", "- \r\n"))


def _parse_hunk(lines: list[str], i: int, m: re.Match[str]) -> tuple[Hunk, int]:
    """One hunk starting at ``lines[i]``; returns it and the index after it.

    Lines are read up to the next header, so a hunk whose ``@@`` counts are wrong (common in
    model-written patches) is still applied whole instead of silently losing its tail; trailing
    blank lines beyond the counts are dropped.
    """
    old_count = int(m.group(2)) if m.group(2) is not None else 1
    new_count = int(m.group(4)) if m.group(4) is not None else 1
    hunk = Hunk(int(m.group(1)), old_count, int(m.group(3)), new_count, lines[i].rstrip("\r\n"))
    i += 1
    satisfied: int | None = 0 if old_count == new_count == 0 else None
    seen_old = seen_new = 0
    while i < len(lines) and not _is_header(lines, i):
        line = lines[i]
        if line.startswith("\\"):
            _drop_newline(hunk)
            i += 1
            continue
        if line[:1] in (" ", "-", "+"):
            op, text = line[:1], line[1:]
        elif line in ("\n", "\r\n"):
            op, text = " ", line
        else:
            break
        hunk.lines.append((op, text))
        seen_old += op != "+"
        seen_new += op != "-"
        if satisfied is None and (seen_old, seen_new) == (old_count, new_count):
            satisfied = len(hunk.lines)
        i += 1
    if satisfied is not None and all(_blank(op, t) for op, t in hunk.lines[satisfied:]):
        del hunk.lines[satisfied:]
    else:
        while hunk.lines and _blank(*hunk.lines[-1]):
            hunk.lines.pop()
        hunk.old_count = sum(op != "+" for op, _ in hunk.lines)
        hunk.new_count = sum(op != "-" for op, _ in hunk.lines)
    if not hunk.lines and not (old_count == 0 and new_count == 0):
        raise ToolError(f"Hunk {hunk.header!r} has no lines.")
    return hunk, i


def _drop_newline(hunk: Hunk) -> None:
    if hunk.lines:
        op, text = hunk.lines[-1]
        hunk.lines[-1] = (op, text[:-2] if text.endswith("\r\n") else text.rstrip("\n"))


def parse_patch(patch: str) -> list[FilePatch]:
    """All file patches in ``patch``; raises :class:`ToolError` when nothing usable is found."""
    lines = [line + "\n" for line in patch.split("\n")]  # only "\n" ends a line (not form feeds …)
    if lines[-1] == "\n":
        lines.pop()
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    git = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip("\r\n")
        if stripped.startswith("diff --git "):
            a, b = _git_names(stripped[len("diff --git ") :])
            cur = FilePatch(a, b, git=True)
            git = True
            files.append(cur)
        elif stripped.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = _header_path(stripped[4:])
            new = _header_path(lines[i + 1].rstrip("\r\n")[4:])
            if cur is None or cur.hunks or not git:
                cur = FilePatch(old, new)
                git = False
                files.append(cur)
            else:
                cur.old_path, cur.new_path = old, new
            i += 1
        elif cur is not None and (m := _HUNK.match(stripped)):
            hunk, i = _parse_hunk(lines, i, m)
            cur.hunks.append(hunk)
            continue
        elif cur is not None and git and not cur.hunks:
            _git_extended(cur, stripped)
        i += 1
    if not files:
        raise ToolError(
            "No file changes found in the patch. Expected a unified diff with "
            "'--- a/path', '+++ b/path' and '@@' hunks."
        )
    for fp in files:
        _strip_prefix(fp)
    return files


def _git_extended(fp: FilePatch, line: str) -> None:
    if line.startswith("new file mode "):
        fp.old_path = None
        fp.new_mode = line.split()[-1]
    elif line.startswith("deleted file mode "):
        fp.new_path = None
    elif line.startswith("rename from "):
        fp.old_path = "a/" + _unquote(line[len("rename from ") :])
    elif line.startswith("rename to "):
        fp.new_path = "b/" + _unquote(line[len("rename to ") :])
    elif line.startswith("new mode "):
        fp.new_mode = line.split()[-1]
    elif line.startswith(("Binary files ", "GIT binary patch")):
        fp.binary = True
