"""The engine's window of a history: its newest whole turns, read back from the head until a budget is met.

A session that was never compacted (an import, a history grown under a bigger model) can hold far
more than any model's context window. The engine cannot send more than a window, and a compaction's
summariser reads at most a window of transcript, so it asks for a bounded history
(``Ledger.history(label, max_chars=)``): the compaction summary, if any, then the newest whole turns
whose stored bodies hold at least ``max_chars`` characters. The rows are read newest first in one
backward rowid scan per path segment that stops at the first row past the budget, so the cost is
that of the window, not of the ancestry; the bodies read are the ones decoded (no second read).
A turn is never split: a tool call stays with its result, and the engine maps messages back to
their turns by count.
"""

from __future__ import annotations

import bisect
import sqlite3
from itertools import accumulate

from nexus._dataclass import dataclass
from nexus.ledger._decode import Origins, SeenOrigins, decode_bodies, load_origins
from nexus.ledger._read import history_plan
from nexus.ledger._schema import SEQ_SHIFT
from nexus.ledger.records import SUMMARY_PREFIX
from nexus.llm import Message, UserMessage

Rows = list[tuple[int, str]]
"""``(key, body)`` rows of one key range, oldest first."""


def history_window(
    conn: sqlite3.Connection, head_id: str | None, max_chars: int, cache: WindowCache | None
) -> list[Message]:
    """The summary (if any) + the window of the history ending at ``head_id``; ``cache`` keeps it decoded."""
    if head_id is None:
        return []
    if max_chars < 0:
        raise ValueError(f"max_chars must be zero or more, got {max_chars}")
    summary, ranges = history_plan(conn, head_id)
    result: list[Message] = [] if summary is None else [UserMessage(SUMMARY_PREFIX + summary, timestamp=0)]
    walk = _Walk(max_chars)
    if cache is None:
        rows: Rows = []
        for lo, hi in reversed(ranges):
            if walk.total >= max_chars:
                break
            rows[:0] = _walk_rows(conn, lo, hi, walk)
        return result + decode_bodies([b for _, b in rows], load_origins(conn))
    parts: list[list[Message]] = []
    for lo, hi in reversed(ranges):
        if walk.total >= max_chars:
            break
        parts.append(cache.window(conn, lo, hi, walk))
    for part in reversed(parts):
        result.extend(part)
    cache.trim()
    return result


@dataclass(slots=True)
class _Walk:
    """Where a backward walk over a history is: characters taken so far, against the budget."""

    max_chars: int
    total: int = 0


@dataclass(slots=True)
class _Entry:
    """Decoded rows ``[keys[0], hi]`` of one key range: keys, running body lengths (``cum``), messages."""

    hi: int
    keys: list[int]
    cum: list[int]
    messages: list[Message]

    def extend(self, rows: Rows, origins: Origins, *, front: bool = False) -> int:
        """Add decoded ``rows`` (key order) after the entry's rows (or before them); returns how many."""
        decoded = decode_bodies([b for _, b in rows], origins)
        keys = [k for k, _ in rows]
        sizes = list(accumulate(len(b) for _, b in rows))
        if front:
            shift = sizes[-1] if sizes else 0
            self.keys, self.messages = keys + self.keys, decoded + self.messages
            self.cum = sizes + [c + shift for c in self.cum]
        else:
            base = self.cum[-1] if self.cum else 0
            self.keys += keys
            self.messages += decoded
            self.cum += [base + c for c in sizes]
        return len(decoded)


class WindowCache:
    """Decoded windows by key-range start, with running body lengths so a warm walk runs in memory.

    A session's next turn reads only its new rows; where the window starts is found by bisection
    over the running lengths, not by re-reading the window. Bounded by a message count like
    :class:`~nexus.ledger._read.MessageCache` (least recently used entries go first).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.entries: dict[int, _Entry] = {}
        self.origins = SeenOrigins()

    def window(self, conn: sqlite3.Connection, lo: int, hi: int, walk: _Walk) -> list[Message]:
        """The window part of range ``[lo, hi]`` (newest rows first, against ``walk``'s budget), decoded."""
        entry = self.entries.pop(lo, None)
        origins: Origins = self.origins.using(conn)  # loaded only when a body names an id not seen
        if entry is None:
            rows = _walk_rows(conn, lo, hi, walk)
            entry = _Entry(hi, [], [], [])
            self.size += entry.extend(rows, origins)
            self.entries[lo] = entry
            return list(entry.messages)
        self.entries[lo] = entry  # most recently used last
        if entry.hi < hi:  # new turns since: read and decode only them
            new = conn.execute(
                "SELECT key, body FROM messages WHERE key > ? AND key <= ? ORDER BY key", (entry.hi, hi)
            ).fetchall()
            self.size += entry.extend(new, origins)
            entry.hi = hi
        end = bisect.bisect_right(entry.keys, hi)  # a shorter path through the range ends earlier
        if end == 0 and entry.keys:  # it ends before the decoded rows (a fork below them): read it apart
            rows = _walk_rows(conn, lo, hi, walk)
            return decode_bodies([b for _, b in rows], origins)
        held = entry.cum[end - 1] if end else 0
        spare = walk.total + held - walk.max_chars
        if spare < 0 and (not entry.keys or entry.keys[0] > lo):  # the window reaches past the decoded rows
            before = walk.total
            walk.total += held  # the decoded rows come first, walking back
            older = _walk_rows(conn, lo, entry.keys[0] - 1 if entry.keys else hi, walk)
            walk.total = before  # counted again below, with the older rows, from the extended entry
            if older:
                self.size += entry.extend(older, origins, front=True)
                end = bisect.bisect_right(entry.keys, hi)
                held = entry.cum[end - 1] if end else 0
                spare = walk.total + held - walk.max_chars
        if spare < 0:
            walk.total += held
            return entry.messages[:end]
        first = bisect.bisect_right(entry.cum, spare, 0, end)  # the row that fills the budget
        start = (
            bisect.bisect_left(entry.keys, entry.keys[first] >> SEQ_SHIFT << SEQ_SHIFT, 0, first)
            if first < end
            else end
        )
        walk.total += held - (entry.cum[start - 1] if start else 0)
        return entry.messages[start:end]

    def trim(self) -> None:
        """When over the limit, forget the least recently used entries down to half of it."""
        if self.size <= self.limit:
            return
        while self.size > self.limit // 2 and self.entries:
            self.size -= len(self.entries.pop(next(iter(self.entries))).messages)


def _walk_rows(conn: sqlite3.Connection, lo: int, hi: int, walk: _Walk) -> Rows:
    """Rows of ``[lo, hi]`` newest first until the budget is met at a turn boundary; returned in key order."""
    rows: Rows = []
    turn = -1
    for key, body in conn.execute(
        "SELECT key, body FROM messages WHERE key BETWEEN ? AND ? ORDER BY key DESC", (lo, hi)
    ):
        if walk.total >= walk.max_chars and key >> SEQ_SHIFT != turn:
            break
        turn = key >> SEQ_SHIFT
        walk.total += len(body)
        rows.append((key, body))
    return rows[::-1]
