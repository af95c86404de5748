"""The pure-Python ``grep`` search and ``find`` walk, run in a child process (``python -E -s -S _pysearch.py``).

Why a process and not a thread: Python's ``re`` holds the GIL for a whole match, so a
catastrophic pattern (``(a+)+$`` over ``"a" * 40 + "!"``) froze the event loop, the run's
timeout and the SIGINT/SIGTERM handlers, and only SIGKILL ended ``nexus``. A child can always
be killed: the ``grep`` tool kills it on abort or timeout, exactly like it kills ripgrep.

The child reads one JSON query on stdin and writes one JSON object per output line
(``{"p": path, "l": line, "t": text, "m": is_match}``); it reads files line by line, so its
memory follows the longest line, not the file size. It needs only the standard library and
the sibling ``_walk.py`` (loaded by path: importing the ``nexus`` package would cost ~100 ms).
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import json
import os
import re
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import IO, Any

MAX_TEXT_CHARS = 501
"""Characters of a line sent back: one more than the tool shows, so it still knows to say "truncated"."""
_BINARY_SNIFF = 8192


def _walk_module() -> ModuleType:
    if __package__:
        return importlib.import_module("nexus.tools._walk")
    spec = importlib.util.spec_from_file_location("_nexus_walk", Path(__file__).with_name("_walk.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(query: dict[str, Any]) -> list[Path]:
    target = Path(query["target"])
    if target.is_file():
        return [target]
    walker = _walk_module()
    pattern: str | None = query.get("glob")
    # like ripgrep (without --follow): symlinks are skipped (one may point outside the workspace),
    # and so are FIFOs and devices (reading one would block)
    return [
        p
        for p, _ in walker.walk(Path(query["root"]), target)
        if (not pattern or walker.glob_match(pattern, p.relative_to(target).as_posix()))
        and not p.is_symlink()
        and p.is_file()
    ]


class _Emitter:
    """Writes output lines; counts matches against the limit."""

    def __init__(self, out: IO[str], limit: int) -> None:
        self.out = out
        self.limit = limit
        self.matches = 0

    def line(self, path: Path, no: int, text: str, is_match: bool) -> None:
        record = {"p": str(path), "l": no, "t": text[:MAX_TEXT_CHARS], "m": is_match}
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.matches += is_match

    @property
    def full(self) -> bool:
        return self.matches >= self.limit


def search_file(path: Path, regex: re.Pattern[str], context: int, emit: _Emitter) -> None:
    """Emit the matches of one file with ``context`` lines around them, reading it line by line."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; a with-block would nest the whole loop
    except OSError:
        return
    with fh:
        if b"\x00" in fh.peek(_BINARY_SNIFF)[:_BINARY_SNIFF]:
            return
        before: collections.deque[tuple[int, str]] = collections.deque(maxlen=context)
        after = 0
        last_emitted = 0
        for no, raw in enumerate(fh, 1):
            if emit.full and after == 0:
                return
            text = raw.rstrip(b"\n").decode("utf-8", "replace").rstrip("\r")
            if not emit.full and regex.search(text):
                for bno, btext in before:
                    if bno > last_emitted:
                        emit.line(path, bno, btext, False)
                before.clear()
                emit.line(path, no, text, True)
                last_emitted, after = no, context
            elif after > 0:
                emit.line(path, no, text, False)
                last_emitted, after = no, after - 1
            elif context:
                before.append((no, text))


def find(query: dict[str, Any], out: IO[str]) -> None:
    """The ``find`` walk: ``{"p": path}`` per file or directory matching ``glob``, at most ``limit`` + 1.

    Here and not in a thread for the same reason as the search: a glob is a regex, and one like
    ``*a*a*a*a*a*a*a*a*a*a*a*a*b`` against a long name backtracks for hours holding the GIL.
    """
    walker = _walk_module()
    target, limit, count = Path(query["target"]), int(query["limit"]), 0
    for path, _ in walker.walk(Path(query["root"]), target, dirs_too=True):
        if walker.glob_match(query["glob"], path.relative_to(target).as_posix()):
            out.write(json.dumps({"p": str(path)}) + "\n")
            count += 1
            if count > limit:
                break
    out.flush()


def run(query: dict[str, Any], out: IO[str]) -> None:
    """Search as ``query`` says (pattern, literal, ignore_case, context, limit, glob, root, target)."""
    if query.get("mode") == "find":
        find(query, out)
        return
    pattern = re.escape(query["pattern"]) if query["literal"] else query["pattern"]
    regex = re.compile(pattern, re.IGNORECASE if query["ignore_case"] else 0)
    emit = _Emitter(out, int(query["limit"]))
    for path in _files(query):
        if emit.full:
            break
        search_file(path, regex, int(query["context"]), emit)
    out.flush()


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (``PR_SET_PDEATHSIG``).

    Otherwise a SIGKILLed ``nexus`` would leave a catastrophic match spinning forever. Safe here:
    this is a fresh interpreter, not a forked copy of a threaded one. Elsewhere a no-op.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def main() -> None:
    """Entry point of the child process: query on stdin, JSON lines on stdout."""
    query = json.loads(sys.stdin.read())
    _die_with_parent(int(query.get("parent", os.getppid())))
    run(query, sys.stdout)


if __name__ == "__main__":
    main()
