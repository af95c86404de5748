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

import sqlite3

from nexus.ledger._decode import Origins, decode_bodies, load_origins
from nexus.ledger._read import MessageCache, history_plan
from nexus.ledger._schema import SEQ_SHIFT
from nexus.ledger.records import SUMMARY_PREFIX
from nexus.llm.types import Message, UserMessage

Rows = list[tuple[int, str]]
"""``(key, body)`` rows of one key range, oldest first."""


def window_rows(conn: sqlite3.Connection, ranges: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int, Rows]]:
    """``(lo, hi, rows)`` of the window of a history's key ``ranges`` (oldest range first).

    Walks back from the newest row and stops at the first row of the turn after the one that
    brought the stored body characters to ``max_chars`` (or when the ranges are used up).
    """
    if max_chars < 0:
        raise ValueError(f"max_chars must be zero or more, got {max_chars}")
    total = 0
    turn = -1
    out: list[tuple[int, int, Rows]] = []
    for lo, hi in reversed(ranges):
        rows: Rows = []
        for key, body in conn.execute(
            "SELECT key, body FROM messages WHERE key BETWEEN ? AND ? ORDER BY key DESC", (lo, hi)
        ):
            if total >= max_chars and key >> SEQ_SHIFT != turn:
                if rows:
                    out.append((rows[-1][0], hi, rows[::-1]))
                return out[::-1]
            turn = key >> SEQ_SHIFT
            total += len(body)
            rows.append((key, body))
        out.append((lo, hi, rows[::-1]))
    return out[::-1]


def history_window(
    conn: sqlite3.Connection, head_id: str | None, max_chars: int, cache: MessageCache | None
) -> list[Message]:
    """The summary (if any) + the window of the history ending at ``head_id``; ``cache`` as in ``history_cached``."""
    if head_id is None:
        return []
    summary, ranges = history_plan(conn, head_id)
    origins: Origins | None = None
    result: list[Message] = [] if summary is None else [UserMessage(SUMMARY_PREFIX + summary, timestamp=0)]
    for lo, hi, rows in window_rows(conn, ranges, max_chars):
        part = None if cache is None else cache.known(lo, hi, len(rows))
        if part is None:
            if origins is None:
                origins = load_origins(conn)
            part = decode_bodies([b for _, b in rows], origins) if cache is None else cache.add(lo, hi, rows, origins)
        result.extend(part)
    if cache is not None:
        cache.trim()
    return result
