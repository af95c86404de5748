"""Pure-Python file walking for ``grep``/``find`` when ripgrep/fd are missing: .gitignore-aware globbing.

The .gitignore matcher is our own small one (no dependency): patterns, ``!`` negation,
trailing ``/`` for directories, ``/`` anchoring and ``**``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path


def find_binary(*names: str) -> str | None:
    """The first of ``names`` on PATH (``fd`` is ``fdfind`` on Debian)."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def pure_python_forced() -> bool:
    """``NEXUS_PURE_PYTHON_SEARCH=1``: grep and find ignore ripgrep/fd (tests use it to cover the fallback)."""
    return os.environ.get("NEXUS_PURE_PYTHON_SEARCH", "") not in ("", "0")


@lru_cache(maxsize=1024)
def glob_regex(pattern: str, braces: bool = True) -> re.Pattern[str]:
    """A regex for a glob: ``*``/``?`` stay inside one path part, ``**`` crosses parts, ``{a,b}`` and ``[..]``."""
    out: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body[:1] in "!^" else body) + "]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "{" and braces:
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile(_without_backtracking(out) + ")" * depth + r"\Z", re.DOTALL)


_STARS = ("[^/]*", ".*")


def _without_backtracking(tokens: list[str]) -> str:
    """Join a glob's regex pieces so that no pattern backtracks catastrophically.

    ``*a*a*a*a*a*a*a*a*a*a*a*a*b`` as ``[^/]*a[^/]*a…`` tries ~C(40, 12) splits of a 40-letter
    name. As in CPython's ``fnmatch``: for *star, fixed-width piece, same star*, the leftmost
    match of the piece is as good as any later one, so ``(?>star?piece)`` (an atomic group) may
    never backtrack into it. A piece that could match ``/`` after an in-part star, a brace or a
    ``**/`` ends the run and is left as it was.
    """
    out: list[str] = []
    i, n = 0, len(tokens)
    while i < n:
        star = tokens[i]
        if star in _STARS:
            j = i + 1
            while j < n and _fixed_width(tokens[j], star):
                j += 1
            if i + 1 < j < n and tokens[j] == star:
                out.append("(?>" + star + "?" + "".join(tokens[i + 1 : j]) + ")")
                i = j
                continue
        out.append(star)
        i += 1
    return "".join(out)


def _fixed_width(token: str, star: str) -> bool:
    """True for one character's piece (a literal, ``?``, a class) that ``star``'s atomic trick may cover."""
    if token in (*_STARS, "(?:.*/)?", "(?:", ")", "|"):
        return False
    if token == "[^/]":
        return True
    if star == ".*":
        return True
    if token.startswith("["):  # a class that can match "/" would let an in-part star's leftmost match skip one
        try:
            return re.match(token, "/") is None
        except re.error:
            return False
    return token != "/"


def glob_match(pattern: str, rel: str) -> bool:
    """ripgrep/fd rule: a pattern without ``/`` matches the file name, otherwise the relative path."""
    if "/" not in pattern.rstrip("/"):
        return glob_regex(pattern).match(rel.rsplit("/", 1)[-1]) is not None
    return glob_regex(pattern.lstrip("/")).match(rel) is not None


class GitIgnore:
    """The rules of one ``.gitignore`` file (last matching rule wins, ``!`` re-includes)."""

    __slots__ = ("_rules",)

    def __init__(self, lines: list[str]) -> None:
        self._rules: list[tuple[re.Pattern[str], bool, bool, bool]] = []
        for raw in lines:
            line = raw.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            line = line.rstrip(" ") if not line.endswith("\\ ") else line
            negate = line.startswith("!")
            if negate or line.startswith("\\!") or line.startswith("\\#"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            self._rules.append((glob_regex(line.lstrip("/"), False), negate, dir_only, anchored))

    def match(self, rel: str, is_dir: bool) -> bool:
        """True when ``rel`` (relative to this file's directory, ``/``-separated) is ignored."""
        name = rel.rsplit("/", 1)[-1]
        ignored = False
        for regex, negate, dir_only, anchored in self._rules:
            if dir_only and not is_dir:
                continue
            if regex.match(rel if anchored else name):
                ignored = not negate
        return ignored


def _load_ignore(directory: Path) -> GitIgnore | None:
    file = directory / ".gitignore"
    if not file.is_file():
        return None
    try:
        return GitIgnore(file.read_text("utf-8", "replace").splitlines())
    except OSError:
        return None


def walk(root: Path, top: Path, *, dirs_too: bool = False) -> Iterator[tuple[Path, bool]]:
    """Yield (path, is_dir) under ``top`` (sorted), skipping ``.git`` and what .gitignore files exclude.

    .gitignore files from ``root`` down to ``top`` apply, each relative to its own directory.
    """
    specs: list[tuple[Path, GitIgnore]] = []
    chain = [top, *top.parents] if top != root else [top]
    for d in reversed(chain):
        if d == root or d.is_relative_to(root):
            spec = _load_ignore(d)
            if spec is not None:
                specs.append((d, spec))
    yield from _walk_dir(top, specs, dirs_too)


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, GitIgnore]]) -> bool:
    return any(spec.match(path.relative_to(base).as_posix(), is_dir) for base, spec in specs)


def _walk_dir(directory: Path, specs: list[tuple[Path, GitIgnore]], dirs_too: bool) -> Iterator[tuple[Path, bool]]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    local = _load_ignore(directory)
    if local is not None and (not specs or specs[-1][0] != directory):
        specs = [*specs, (directory, local)]
    for entry in entries:
        if entry.name == ".git":
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        path = Path(entry.path)
        if _ignored(path, is_dir, specs):
            continue
        if is_dir:
            if dirs_too:
                yield path, True
            yield from _walk_dir(path, specs, dirs_too)
        else:
            yield path, False


class IgnoreChecker:
    """Answers "is this path ignored?" for paths found by other means (fd outside a git repository)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[Path, GitIgnore | None] = {}
        self._dirs: dict[Path, bool] = {}

    def _spec(self, directory: Path) -> GitIgnore | None:
        if directory not in self._specs:
            self._specs[directory] = _load_ignore(directory)
        return self._specs[directory]

    def _matches(self, path: Path, is_dir: bool) -> bool:
        for d in [*reversed(path.parents)]:
            if d != self.root and not d.is_relative_to(self.root):
                continue
            spec = self._spec(d)
            if spec is not None and spec.match(path.relative_to(d).as_posix(), is_dir):
                return True
        return False

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """True when ``path`` or one of its parent directories (below the root) is ignored."""
        if path == self.root or not path.is_relative_to(self.root):
            return False
        parent = path.parent
        if parent != self.root:
            if parent not in self._dirs:
                self._dirs[parent] = self.ignored(parent, True)
            if self._dirs[parent]:
                return True
        return self._matches(path, is_dir)
