"""The turn tree a session belongs to: every turn under its root, forks included, for UIs.

Segments make this cheap: a fork opens a segment whose ``parent_segment_id`` points at the one
it left, so the segments under a root are a small recursive walk, and their turns are rowid
range reads — no walk over every turn's parent pointer.
"""

from __future__ import annotations

import sqlite3

from nexus.ledger._rows import TURN_COLUMNS, turn_from_row, turn_position
from nexus.ledger.records import Turn


def tree_turns(conn: sqlite3.Connection, head_id: str, limit: int) -> tuple[list[Turn], bool]:
    """Closed turns of the tree containing ``head_id``, oldest first; ``True`` if ``limit`` cut it."""
    seg, _, _ = turn_position(conn, head_id)
    root_segment = conn.execute(
        "WITH RECURSIVE up(id, parent) AS ("
        " SELECT id, parent_segment_id FROM segments WHERE id = ?"
        " UNION ALL SELECT s.id, s.parent_segment_id FROM segments s JOIN up ON s.id = up.parent)"
        " SELECT id FROM up WHERE parent IS NULL",
        (seg,),
    ).fetchone()[0]
    rows = conn.execute(
        "WITH RECURSIVE down(id) AS ("
        " SELECT CAST(? AS BIGINT) UNION ALL SELECT s.id FROM segments s JOIN down ON s.parent_segment_id = down.id)"
        f" SELECT {TURN_COLUMNS} FROM turns WHERE segment_id IN (SELECT id FROM down)"
        " AND status IN ('completed', 'failed', 'aborted') ORDER BY started_at, id LIMIT ?",
        (root_segment, limit + 1),
    ).fetchall()
    return [turn_from_row(row) for row in rows[:limit]], len(rows) > limit
