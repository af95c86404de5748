"""The PostgreSQL :class:`~nexus.routing.store.CheckpointStore` and :class:`~nexus.routing.store.DecisionLog`.

The tables are migration ``0005_routing`` of the PostgreSQL ledger; the SQL is the SQLite store's where it
can be (the connection rewrites ``?``), and differs in four places:

- **What is new**: turns have no row number here, so the watermark is a completion time. The indexer reads
  the closed turns completed after the watermark minus :data:`LATE_MS` that have no checkpoint yet — a turn
  whose close committed late (a slow transaction, another broker's clock a little behind) is still inside
  the margin, and a turn open for hours is found when it closes, by its completion time.
- **The agent** of a turn: its session's ``metadata_json`` ``agent``, else the agent registered on the
  session, decoded here (SQLite does it with ``json_extract``).
- **Words**: no full-text index; the three columns of words are stored with the row and loaded into the
  in-memory BM25 (:mod:`nexus.routing._lexical`), which is what searches on both backends.
- **Ids**: ``RETURNING id`` instead of SQLite's ``lastrowid``. A sequence hands ids out in insert order, but
  rows become visible in commit order, and :meth:`load` reads "every id above the highest this process has".
  That is safe because every indexing transaction also writes the one watermark row under ``SERIALIZABLE``:
  of two that overlap, the later to commit is refused and run again, taking an id above the other's, so a
  lower id never commits after a higher one (``tests/routing/test_pg_index_race.py`` holds it). Moving these
  writes to ``READ COMMITTED`` or dropping the watermark write would break it.

Every call is one transaction of the ledger's pool, run on the calling thread (a worker, never the loop).
"""

from __future__ import annotations

import json
from typing import Any

from nexus.ledger import Ledger
from nexus.routing._lexical import columns_of
from nexus.routing._sqlite_store import (
    CHECKPOINT_COLUMNS,
    SqliteRouteStore,
    add_vector,
    checkpoint_values,
    existing_id,
)
from nexus.routing.store import CheckpointMeta, NewCheckpoint, TurnRow

LATE_MS = 300_000
"""How far before the watermark the indexer looks again for turns whose close committed late (5 minutes)."""

_PENDING = (
    "SELECT t.id, t.session_label, s.metadata_json,"
    " (SELECT a.id FROM agents a WHERE a.session_label = t.session_label AND a.status = 'active' ORDER BY a.id"
    " LIMIT 1), t.parent_turn_id, t.segment_id, t.seq, t.status, t.turn_type, t.error_json IS NOT NULL,"
    " COALESCE(t.completed_at, t.started_at), t.workspace_path"
    " FROM turns t LEFT JOIN sessions s ON s.label = t.session_label"
    " WHERE t.status IN ('completed', 'failed', 'aborted') AND COALESCE(t.completed_at, t.started_at) > ?"
    " AND NOT EXISTS (SELECT 1 FROM route_checkpoints c WHERE c.turn_id = t.id)"
    " ORDER BY COALESCE(t.completed_at, t.started_at), t.id LIMIT ?"
)


class PgRouteStore(SqliteRouteStore):
    """Checkpoints, their words, vectors, watermark and decisions in a PostgreSQL ledger."""

    def __init__(self, ledger: Ledger) -> None:  # not the SQLite store's: the ledger's pool serves any thread
        self._own = None
        self._db = ledger.database

    def pending_turns(self, limit: int) -> list[TurnRow]:
        def read(conn: Any) -> list[TurnRow]:
            rows = conn.execute(_PENDING, (self._watermark(conn) - LATE_MS, limit)).fetchall()
            return [
                TurnRow(r[10], r[0], r[1], _agent(r[2], r[3]), r[4], r[5], r[6], r[7], r[8], bool(r[9]), r[10], r[11])
                for r in rows
            ]

        return self._db.read(read)

    def safe_watermark(self, scanned_up_to: int) -> int:
        """Completion times only grow past a turn still open (it is found when it closes): no cap needed."""
        return scanned_up_to

    def _insert(self, conn: Any, cp: NewCheckpoint, embedder: str) -> int:
        words = columns_of(cp.ask, cp.reply, cp.files_text)
        row = conn.execute(
            f"INSERT INTO route_checkpoints ({CHECKPOINT_COLUMNS}, ask_words, reply_words, file_words)"
            f" VALUES ({', '.join('?' * 17)}) ON CONFLICT (turn_id) DO NOTHING RETURNING id",
            (*checkpoint_values(cp), *words),
        ).fetchone()
        if row is None:
            return existing_id(conn, cp.turn.turn_id)
        checkpoint_id = int(row[0])
        add_vector(conn, checkpoint_id, embedder, cp.vector)
        return checkpoint_id

    def load(self, embedder: str, after_id: int = 0) -> list[CheckpointMeta]:
        rows = self._db.read(
            lambda c: c.execute(
                "SELECT c.id, c.agent_id, c.segment_id, c.position, c.parent_turn_id, c.turn_id, c.completed_at,"
                " c.quality, c.link, v.vector, c.ask_words, c.reply_words, c.file_words FROM route_checkpoints c"
                " LEFT JOIN route_vectors v ON v.checkpoint_id = c.id AND v.embedder = ?"
                " WHERE c.id > ? ORDER BY c.id",
                (embedder, after_id),
            ).fetchall()
        )
        return [_meta(r) for r in rows]

    def clear(self) -> None:
        def write(conn: Any) -> None:
            conn.execute("DELETE FROM route_vectors")
            conn.execute("DELETE FROM route_checkpoints")
            conn.execute("DELETE FROM route_state WHERE key = 'watermark'")

        self._db.write(write)


def _meta(r: Any) -> CheckpointMeta:
    vector = None if r[9] is None else bytes(r[9])
    return CheckpointMeta(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], vector, (r[10], r[11], r[12]))


def _agent(metadata_json: str | None, registered: str | None) -> str | None:
    """The agent a session's metadata names (``{"agent": ...}``), else the one registered on the session."""
    try:
        metadata = json.loads(metadata_json) if metadata_json else None
    except ValueError:
        metadata = None
    named = metadata.get("agent") if isinstance(metadata, dict) else None
    return str(named) if isinstance(named, str) and named else registered
