"""Ancestry as segment ranges: the few ``(segment_id, lo_seq, hi_seq)`` spans from a root to a turn.

A path crosses one segment per fork on it, so every ancestry question (history, "is X an
ancestor of Y", which sessions contain a turn) costs O(forks on the path) primary-key
lookups instead of O(depth) recursion.
"""

from __future__ import annotations

import sqlite3

Range = tuple[int, int, int]


def path_ranges(conn: sqlite3.Connection, segment_id: int, seq: int) -> list[Range]:
    """Root-first ranges of the ancestry of the turn at ``(segment_id, seq)`` (inclusive of it)."""
    ranges: list[Range] = []
    seg: int | None = segment_id
    hi = seq
    while seg is not None:
        row = conn.execute("SELECT parent_segment_id, parent_seq FROM segments WHERE id = ?", (seg,)).fetchone()
        parent_seg, parent_seq = row[0], row[1]
        lo = 0 if parent_seg is None else int(parent_seq) + 1
        ranges.append((seg, lo, hi))
        seg, hi = parent_seg, (0 if parent_seq is None else int(parent_seq))
    ranges.reverse()
    return ranges


def on_path(ranges: list[Range], segment_id: int, seq: int) -> bool:
    """True if the turn at ``(segment_id, seq)`` lies on the path described by ``ranges``."""
    return any(seg == segment_id and lo <= seq <= hi for seg, lo, hi in ranges)
