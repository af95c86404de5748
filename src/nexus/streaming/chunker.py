"""The block chunker: reply tokens in, blocks of ``min_chars``..``max_chars`` out (reference/openclaw.md §2).

Rules, in order:

- Nothing is emitted before the buffer holds ``min_chars``; a blank line (``\\n[\\t ]*\\n``)
  at or past ``min_chars`` outside a code fence emits the paragraph at once.
- When the buffer grows past ``max_chars``, it is cut inside its first ``max_chars`` at the
  best break at or past ``min_chars``: paragraph > newline > sentence end (``[.!?]`` and a
  space) > whitespace > a hard cut at ``max_chars``.
- A cut never lands inside a code fence. When a fence is too long to fit (or a flush comes
  while it is open), the block closes it with its marker and the next block reopens it with
  the same opening line; :class:`Block` records what was inserted so the original text can
  always be recovered (the property tests check exactly that).
- ``flush()`` (idle, tool call, end of stream) emits what is buffered, cut to ``max_chars``.

Cost: each token is appended and checked for ``\\n`` (C-level); line classification runs once
per line and the break search once per block over at most ``max_chars`` characters, so the
work is linear in the text, whatever the token sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_PARAGRAPH = re.compile(r"\n[\t ]*\n")
_SENTENCE = re.compile(r"[.!?][ \t\n]")


@dataclass(slots=True, frozen=True)
class Block:
    """One block of reply text; ``reopened`` / ``closer`` are fence lines the chunker inserted.

    ``text`` starts with ``reopened`` (the opening line of a fence split by the previous
    block, plus a newline) and ends with ``closer`` (a newline if needed plus the fence
    marker); both are empty for a block that split no fence.
    """

    text: str
    reopened: str = ""
    closer: str = ""

    @property
    def original(self) -> str:
        """The block's share of the original text (inserted fence lines removed)."""
        return self.text[len(self.reopened) : len(self.text) - len(self.closer)]


@dataclass(slots=True)
class _Fence:
    start: int  # offset of the opening line in the buffer
    body: int  # offset just after the opening line's newline
    opener: str
    indent: str
    marker: str
    end: int | None = None  # offset just after the closing line's newline; None while open

    def contains(self, pos: int) -> bool:
        """Whether a cut at ``pos`` would split this fence."""
        return self.start < pos and (self.end is None or pos < self.end)

    def closer_for(self, text: str) -> str:
        return ("" if text.endswith("\n") else "\n") + self.indent + self.marker


class BlockChunker:
    """Incremental chunker; ``push(text)`` and ``flush()`` return the blocks that became ready.

    Not thread-safe and not async: the pipeline owns one per delivery.
    """

    __slots__ = ("_buf", "_fences", "_line_start", "_max", "_min", "_open", "_pending_reopen", "_prefix")

    def __init__(self, min_chars: int = 800, max_chars: int = 1200) -> None:
        if max_chars < 16:
            raise ValueError(f"max_chars must be at least 16, got {max_chars}")
        self._max = max_chars
        self._min = max(1, min(min_chars, max_chars))
        self._buf = ""
        self._line_start = 0
        self._fences: list[_Fence] = []
        self._open: _Fence | None = None
        self._prefix = 0
        self._pending_reopen = ""

    @property
    def buffered(self) -> int:
        """Characters waiting in the buffer (0 when a flush would emit nothing)."""
        return len(self._buf) - self._prefix

    def push(self, text: str) -> list[Block]:
        """Add reply text; returns the blocks it completed (often none)."""
        if not text:
            return []
        if self._pending_reopen:
            self._reopen()
        self._buf += text
        if "\n" not in text and len(self._buf) <= self._max:
            return []
        out: list[Block] = []
        self._scan(out)
        return out

    def flush(self) -> list[Block]:
        """Emit everything buffered (cut to ``max_chars``); an open fence is closed, and reopened by more text."""
        out: list[Block] = []
        self._scan(out)
        self._classify_partial_line()
        fence = self._open
        while fence is not None and len(self._buf) + len(fence.closer_for(self._buf)) > self._max:
            out.append(self._cut())
            fence = self._open
        if len(self._buf) <= self._prefix:
            return out
        if fence is not None and not self._degenerate(fence):
            out.append(self._emit(len(self._buf), fence.closer_for(self._buf), fence))
            self._pending_reopen = self._buf
            self._buf, self._prefix, self._line_start, self._fences = "", 0, 0, []
        else:
            out.append(self._emit(len(self._buf)))
        return out

    def reset(self) -> None:
        """Forget everything (the delivery ended)."""
        self._buf, self._line_start, self._fences, self._open = "", 0, [], None
        self._prefix, self._pending_reopen = 0, ""

    # -- scanning ---------------------------------------------------------------------------

    def _scan(self, out: list[Block]) -> None:
        while True:
            nl = self._buf.find("\n", self._line_start)
            limit = nl + 1 if nl >= 0 else len(self._buf)
            if limit > self._max:
                out.append(self._cut())
                continue
            if nl < 0:
                return
            self._complete_line(nl, out)

    def _complete_line(self, nl: int, out: list[Block]) -> None:
        start = self._line_start
        line = self._buf[start:nl]
        self._line_start = nl + 1
        fence = self._open
        if fence is not None:
            if line.lstrip(" ")[:1] == fence.marker[0]:
                match = _FENCE_CLOSE.fullmatch(line)
                if match and match.group(1)[0] == fence.marker[0] and len(match.group(1)) >= len(fence.marker):
                    fence.end = nl + 1
                    self._open = None
            return
        stripped = line.strip(" \t")
        if not stripped:
            if start > 0 and nl + 1 >= self._min and nl + 1 > self._prefix:
                out.append(self._emit(nl + 1))
            return
        if stripped[0] in "`~":
            match = _FENCE_OPEN.fullmatch(line)
            if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
                fence = _Fence(start, nl + 1, line, match.group(1), match.group(2))
                self._fences.append(fence)
                self._open = fence

    def _classify_partial_line(self) -> None:
        """At a flush, the unfinished last line counts as a line: it may close or open a fence."""
        start = self._line_start
        line = self._buf[start:]
        if not line.strip() or line.lstrip(" ")[:1] not in ("`", "~"):
            return
        fence = self._open
        if fence is not None:
            match = _FENCE_CLOSE.fullmatch(line)
            if match and match.group(1)[0] == fence.marker[0] and len(match.group(1)) >= len(fence.marker):
                fence.end = len(self._buf)
                self._open = None
            return
        match = _FENCE_OPEN.fullmatch(line)
        if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
            fence = _Fence(start, len(self._buf), line, match.group(1), match.group(2))
            self._fences.append(fence)
            self._open = fence

    # -- cutting ----------------------------------------------------------------------------

    def _cut(self) -> Block:
        window = self._buf[: self._max]
        pos = self._best_break(window)
        if pos > 0:
            return self._emit(pos)
        fence = self._fence_at(self._max)
        if fence is not None and not self._degenerate(fence):
            return self._split_fence(fence)
        return self._emit(self._hard_cut(self._max, self._prefix + 1))

    def _hard_cut(self, pos: int, lowest: int) -> int:
        """``pos``, or the nearest cut before it (not below ``lowest``) that leaves no fence marker at the start of
        the next block (see :meth:`_marks_a_fence`); ``pos`` itself when there is none."""
        cut = pos
        while cut > lowest and self._marks_a_fence(cut):
            cut -= 1
        return pos if self._marks_a_fence(cut) else cut

    def _marks_a_fence(self, pos: int) -> bool:
        """Whether a cut at ``pos``, inside a line, may leave the rest of the line starting with a fence marker: the
        next block starts a line with it, where it reads as a fence the original line never was (a property test
        found ``xxx````\\n`` cut before its backticks: the next block's reopened fence was closed by them at once).

        Judged by the one character after the cut (a fence line starts with a space, a backtick or a tilde), never
        by more: a cut is decided once ``max_chars`` are buffered, and what follows may not have arrived yet, so
        looking further would cut a text differently by how its tokens fell."""
        if pos <= 0 or pos >= len(self._buf) or self._buf[pos - 1] == "\n":
            return False  # nothing after the cut yet (a flush), or the cut starts a line, as in the original
        return self._buf[pos] in "`~ "

    def _best_break(self, window: str) -> int:
        lowest = max(self._min, self._prefix + 1)
        for pos in _paragraph_breaks(window):
            if pos < lowest:
                break
            if self._valid(pos):
                return pos
        for finder in (_newline_breaks, _sentence_breaks, _space_breaks):
            for pos in finder(window):
                if pos < lowest:
                    break
                if self._valid(pos):
                    return pos
        return -1

    def _valid(self, pos: int) -> bool:
        if any(f.contains(pos) for f in self._fences) or self._marks_a_fence(pos):
            return False
        if pos > self._line_start:  # inside the line being written: never inside a fence's opening line
            return self._buf[self._line_start : self._line_start + 4].lstrip(" ")[:3] not in ("```", "~~~")
        return True

    def _fence_at(self, pos: int) -> _Fence | None:
        for fence in self._fences:
            if fence.contains(pos):
                return fence
        return None

    def _degenerate(self, fence: _Fence) -> bool:
        """A fence whose opening line leaves no room for content in a block is cut like plain text."""
        overhead = len(fence.opener) + 1 + len(fence.indent) + len(fence.marker) + 1
        return overhead * 2 > self._max

    def _split_fence(self, fence: _Fence) -> Block:
        marker_len = len(fence.indent) + len(fence.marker)
        budget = self._max - marker_len
        cut = self._buf.rfind("\n", fence.body, budget) + 1
        if cut <= fence.body:
            cut = self._hard_cut(budget - 1, fence.body)  # no line fits: the closer needs its own newline
        if cut <= fence.body:
            if fence.start > self._prefix:
                return self._emit(fence.start)
            return self._emit(self._max)
        return self._emit(cut, fence.closer_for(self._buf[:cut]), fence)

    def _emit(self, pos: int, closer: str = "", reopen: _Fence | None = None) -> Block:
        buf = self._buf
        block = Block(buf[:pos] + closer, buf[: self._prefix], closer)
        prefix = reopen.opener + "\n" if reopen is not None else ""
        delta = len(prefix) - pos
        self._buf = prefix + buf[pos:]
        self._prefix = len(prefix)
        self._line_start = max(self._line_start + delta, len(prefix))
        kept: list[_Fence] = []
        for fence in self._fences:
            if fence is reopen:
                fence.start, fence.body = 0, len(prefix)
                if fence.end is not None:
                    fence.end += delta
                kept.append(fence)
            elif fence.end is None or fence.end > pos:
                fence.start += delta
                fence.body += delta
                if fence.end is not None:
                    fence.end += delta
                kept.append(fence)
        self._fences = kept
        return block

    def _reopen(self) -> None:
        prefix = self._pending_reopen
        self._pending_reopen = ""
        fence = self._open
        if fence is None:
            return
        fence.start, fence.body, fence.end = 0, len(prefix), None
        self._buf, self._prefix, self._line_start, self._fences = prefix, len(prefix), len(prefix), [fence]


def _paragraph_breaks(window: str) -> list[int]:
    return [m.end() for m in reversed(list(_PARAGRAPH.finditer(window)))]


def _newline_breaks(window: str) -> list[int]:
    out: list[int] = []
    i = window.rfind("\n")
    while i >= 0 and len(out) < 64:
        out.append(i + 1)
        i = window.rfind("\n", 0, i)
    return out


def _sentence_breaks(window: str) -> list[int]:
    return [m.end() for m in reversed(list(_SENTENCE.finditer(window)))]


def _space_breaks(window: str) -> list[int]:
    out: list[int] = []
    end = len(window)
    while len(out) < 64:
        i = max(window.rfind(" ", 0, end), window.rfind("\t", 0, end))
        if i < 0:
            break
        out.append(i + 1)
        end = i
    return out
