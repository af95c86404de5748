"""The SQLite :class:`~nexus.routing.store.CheckpointStore` and :class:`~nexus.routing.store.DecisionLog`.

Both live in the ledger's own file (tables of schema version 13, ``nexus.ledger._schema``) and read the
ledger's ``turns``, ``sessions``, ``agents`` and ``queue_items`` tables for what they index and settle.
They use a connection of their own when the ledger is a file (a second :class:`~nexus.ledger.Ledger` on
the same path), so indexing on a worker thread never takes the lock the event loop's writes use.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from nexus.ledger import Ledger, is_postgres_url
from nexus.routing._lexical import rows_from_instances
from nexus.routing._words import index_text
from nexus.routing.errors import RouteRequestError, RoutingError
from nexus.routing.store import (
    CheckpointMeta,
    CheckpointRow,
    DecisionRecord,
    FileStamp,
    NewCheckpoint,
    TurnRow,
)

_CLOSED = "('completed', 'failed', 'aborted')"
_AGENT = (
    "COALESCE(CASE WHEN json_valid(s.metadata_json) THEN json_extract(s.metadata_json, '$.agent') END,"
    " (SELECT a.id FROM agents a WHERE a.session_label = t.session_label AND a.status = 'active' LIMIT 1))"
)
_PENDING = (
    f"SELECT t.rowid, t.id, t.session_label, {_AGENT}, t.parent_turn_id, t.segment_id, t.seq, t.status,"
    " t.turn_type, t.error_json IS NOT NULL, COALESCE(t.completed_at, t.started_at), t.workspace_path"
    " FROM turns t LEFT JOIN sessions s ON s.label = t.session_label"
    f" WHERE t.rowid > ? AND t.status IN {_CLOSED}"
    " AND NOT EXISTS (SELECT 1 FROM route_checkpoints c WHERE c.turn_id = t.id)"
    " ORDER BY t.rowid LIMIT ?"
)
_ROW_COLUMNS = (
    "id, turn_id, session_label, agent_id, segment_id, position, status, quality, completed_at, context, files_json"
)
_ALTERNATIVES = 10
"""Where ``alternatives`` (JSON in its column) is among :class:`DecisionRecord`'s fields, in column order."""
_DECISION_COLUMNS = (
    "id, created_at, task, agent_id, conversation_id, routing_mode, arm, decision, turn_id, confidence,"
    " alternatives_json, embedder, took_ms, session_label, message_id, outcome_status, outcome_turns,"
    " outcome_tokens, outcome_cost, outcome_at, feedback, feedback_note"
)


CHECKPOINT_COLUMNS = (
    "turn_id, turn_rowid, session_label, agent_id, parent_turn_id, segment_id, position, status, quality, link,"
    " completed_at, context, files_json, indexed_at"
)


def checkpoint_values(cp: NewCheckpoint) -> tuple[Any, ...]:
    """The values of :data:`CHECKPOINT_COLUMNS` for a new checkpoint (both backends insert them)."""
    t = cp.turn
    files = json.dumps([[f.path, f.size, f.mtime_ns, f.digest, f.name] for f in cp.files])
    return (
        t.turn_id, t.rowid, t.session_label, t.agent_id, t.parent_turn_id, t.segment_id, t.position, t.status,
        cp.quality, cp.link, t.completed_at, cp.context, files, _now_ms(),
    )  # fmt: skip


def existing_id(conn: Any, turn_id: str) -> int:
    """The id of a checkpoint another process stored first (two indexers saw the same turn pending)."""
    return int(conn.execute("SELECT id FROM route_checkpoints WHERE turn_id = ?", (turn_id,)).fetchone()[0])


def add_vector(conn: Any, checkpoint_id: int, embedder: str, vector: bytes | None) -> None:
    if vector is not None:
        conn.execute(
            "INSERT INTO route_vectors (checkpoint_id, embedder, vector) VALUES (?, ?, ?)",
            (checkpoint_id, embedder, vector),
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _files(raw: str) -> tuple[FileStamp, ...]:
    try:
        return tuple(FileStamp(str(p), int(s), int(m), str(d), str(n)) for p, s, m, d, n in json.loads(raw))
    except (ValueError, TypeError):
        return ()


class SqliteRouteStore:
    """Checkpoints, search rows, vectors, watermark and decisions in the ledger's SQLite file."""

    def __init__(self, ledger: Ledger) -> None:
        path = ledger.path
        if is_postgres_url(path):
            raise RoutingError("this ledger is on PostgreSQL: open its route store with open_route_store()")
        # a file: our own connection (its own lock); ":memory:" is private to its connection
        self._own = None if path == ":memory:" else Ledger.open(path, message_cache=0)
        self._db = (self._own or ledger).database

    def close(self) -> None:
        if self._own is not None:
            self._own.close()

    # ------------------------------------------------------------------ index

    def _watermark(self, conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT value FROM route_state WHERE key = 'watermark'").fetchone()
        return int(row[0]) if row else 0

    def _set_watermark(self, conn: sqlite3.Connection, mark: int) -> None:
        conn.execute(
            "INSERT INTO route_state (key, value) VALUES ('watermark', ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (str(mark),),
        )

    def pending_turns(self, limit: int) -> list[TurnRow]:
        def read(conn: sqlite3.Connection) -> list[TurnRow]:
            rows = conn.execute(_PENDING, (self._watermark(conn), limit)).fetchall()
            return [
                TurnRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9]), r[10], r[11]) for r in rows
            ]

        return self._db.read(read)

    def safe_watermark(self, scanned_up_to: int) -> int:
        """The watermark to keep after scanning up to ``scanned_up_to``: never past a turn still open."""

        def read(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT min(rowid) FROM turns WHERE status IN ('pending', 'streaming') AND rowid > ?",
                (self._watermark(conn),),
            ).fetchone()
            return scanned_up_to if row[0] is None else min(scanned_up_to, int(row[0]) - 1)

        return self._db.read(read)

    def known_agents(self) -> list[str]:
        rows = self._db.read(
            lambda c: c.execute("SELECT id FROM agents WHERE status = 'active' ORDER BY id").fetchall()
        )
        return [str(r[0]) for r in rows]

    def add(self, checkpoints: Sequence[NewCheckpoint], embedder: str, watermark: int) -> list[int]:
        def write(conn: sqlite3.Connection) -> list[int]:
            ids = [self._insert(conn, cp, embedder) for cp in checkpoints]
            self._set_watermark(conn, max(watermark, self._watermark(conn)))
            return ids

        return self._db.write(write)

    def _insert(self, conn: sqlite3.Connection, cp: NewCheckpoint, embedder: str) -> int:
        cursor = conn.execute(
            f"INSERT INTO route_checkpoints ({CHECKPOINT_COLUMNS}) VALUES ({', '.join('?' * 14)})"
            " ON CONFLICT (turn_id) DO NOTHING",
            checkpoint_values(cp),
        )
        if cursor.rowcount == 0:
            return existing_id(conn, cp.turn.turn_id)
        checkpoint_id = int(cursor.lastrowid or 0)
        conn.execute(
            "INSERT INTO route_fts (rowid, ask, reply, files) VALUES (?, ?, ?, ?)",
            (checkpoint_id, index_text(cp.ask), index_text(cp.reply), index_text(cp.files_text)),
        )
        add_vector(conn, checkpoint_id, embedder, cp.vector)
        return checkpoint_id

    def refresh_ancestors(self, changes: Sequence[tuple[str, tuple[FileStamp, ...]]], max_steps: int) -> None:
        def write(conn: sqlite3.Connection) -> None:
            for parent, stamps in changes:
                _refresh_path(conn, parent, {f.path: f for f in stamps}, max_steps)

        if changes:
            self._db.write(write)

    def load(self, embedder: str, after_id: int = 0) -> list[CheckpointMeta]:
        def read(conn: sqlite3.Connection) -> tuple[list[Any], dict[int, tuple[str, str, str]]]:
            rows = conn.execute(
                "SELECT c.id, c.agent_id, c.segment_id, c.position, c.parent_turn_id, c.turn_id, c.completed_at,"
                " c.quality, c.link, v.vector FROM route_checkpoints c"
                " LEFT JOIN route_vectors v ON v.checkpoint_id = c.id AND v.embedder = ?"
                " WHERE c.id > ? ORDER BY c.id",
                (embedder, after_id),
            ).fetchall()
            return rows, _words_of(conn, after_id) if rows else {}

        rows, words = self._db.read(read)
        return [_meta(r, words.get(int(r[0]), ("", "", ""))) for r in rows]

    def files_of(self, turn_ids: Sequence[str]) -> dict[str, tuple[FileStamp, ...]]:
        if not turn_ids:
            return {}
        marks = ", ".join("?" * len(turn_ids))
        rows = self._db.read(
            lambda c: c.execute(
                f"SELECT turn_id, files_json FROM route_checkpoints WHERE turn_id IN ({marks})", tuple(turn_ids)
            ).fetchall()
        )
        return {r[0]: _files(r[1]) for r in rows}

    def without_vector(self, embedder: str, limit: int) -> list[tuple[int, str]]:
        rows = self._db.read(
            lambda c: c.execute(
                "SELECT c.id, c.turn_id FROM route_checkpoints c LEFT JOIN route_vectors v"
                " ON v.checkpoint_id = c.id AND v.embedder = ? WHERE v.checkpoint_id IS NULL ORDER BY c.id LIMIT ?",
                (embedder, limit),
            ).fetchall()
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def set_vectors(self, embedder: str, vectors: Sequence[tuple[int, bytes]]) -> None:
        self._db.write(
            lambda c: c.executemany(
                "INSERT INTO route_vectors (checkpoint_id, embedder, vector) VALUES (?, ?, ?)"
                " ON CONFLICT(checkpoint_id) DO UPDATE SET embedder = excluded.embedder, vector = excluded.vector",
                [(i, embedder, v) for i, v in vectors],
            )
        )

    def rows(self, ids: Sequence[int]) -> list[CheckpointRow]:
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        rows = self._db.read(
            lambda c: c.execute(
                f"SELECT {_ROW_COLUMNS} FROM route_checkpoints WHERE id IN ({marks})", tuple(ids)
            ).fetchall()
        )
        return [CheckpointRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], _files(r[10])) for r in rows]

    def clear(self) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM route_vectors")
            conn.execute("DELETE FROM route_checkpoints")
            conn.execute("INSERT INTO route_fts (route_fts) VALUES ('delete-all')")
            conn.execute("DELETE FROM route_state WHERE key = 'watermark'")

        self._db.write(write)

    def count(self) -> int:
        return int(self._db.read(lambda c: c.execute("SELECT count(*) FROM route_checkpoints").fetchone()[0]))

    # ------------------------------------------------------------------ decisions

    def record(self, decision: DecisionRecord) -> None:
        values = [getattr(decision, f.name) for f in fields(DecisionRecord)]
        values[_ALTERNATIVES] = json.dumps(decision.alternatives)
        marks = ", ".join("?" * len(values))
        self._db.write(
            lambda c: c.execute(f"INSERT INTO route_decisions ({_DECISION_COLUMNS}) VALUES ({marks})", values)
        )

    def attach(self, decision_id: str, session_label: str, message_id: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            done = conn.execute(
                "UPDATE route_decisions SET session_label = ?, message_id = ? WHERE id = ?",
                (session_label, message_id, decision_id),
            ).rowcount
            if not done:
                raise RouteRequestError(f"no routing decision {decision_id!r}; see `nexus route stats`")

        self._db.write(write)

    def settle(self) -> int:
        return self._db.write(_settle)

    def feedback(self, decision_id: str, score: int, note: str | None = None) -> None:
        def write(conn: sqlite3.Connection) -> None:
            done = conn.execute(
                "UPDATE route_decisions SET feedback = ?, feedback_note = ? WHERE id = ?", (score, note, decision_id)
            ).rowcount
            if not done:
                raise RouteRequestError(
                    f"no routing decision {decision_id!r}: a decision's id is printed by `nexus route TASK` and "
                    "`nexus send --route`, and is the `route.decision` of the HTTP answer"
                )

        self._db.write(write)

    def decisions(self, since_ms: int = 0) -> list[DecisionRecord]:
        rows = self._db.read(
            lambda c: c.execute(
                f"SELECT {_DECISION_COLUMNS} FROM route_decisions WHERE created_at >= ? ORDER BY created_at, id",
                (since_ms,),
            ).fetchall()
        )
        return [_decision(r) for r in rows]


def _refresh_path(conn: sqlite3.Connection, turn_id: str | None, stamps: dict[str, FileStamp], steps: int) -> None:
    for _ in range(steps):
        if turn_id is None:
            return
        row = conn.execute(
            "SELECT id, parent_turn_id, files_json FROM route_checkpoints WHERE turn_id = ?", (turn_id,)
        ).fetchone()
        if row is None:
            return
        files = _files(row[2])
        if any(f.path in stamps for f in files):
            fresh = [stamps.get(f.path, f) for f in files]
            fresh = [
                FileStamp(f.path, f.size, f.mtime_ns, f.digest, old.name) for f, old in zip(fresh, files, strict=True)
            ]
            conn.execute(
                "UPDATE route_checkpoints SET files_json = ? WHERE id = ?",
                (json.dumps([[f.path, f.size, f.mtime_ns, f.digest, f.name] for f in fresh]), row[0]),
            )
        turn_id = row[1]


def _meta(r: Sequence[Any], columns: tuple[str, str, str]) -> CheckpointMeta:
    return CheckpointMeta(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], columns)


_COLUMN = {"ask": 0, "reply": 1, "files": 2}


def _words_of(conn: sqlite3.Connection, after_id: int) -> dict[int, tuple[str, str, str]]:
    """The words of checkpoints above ``after_id``, read back out of the FTS5 index (the table is contentless,
    its ``instance`` vocabulary still says which term is in which row and column, how often)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.route_instances USING fts5vocab(main, route_fts, instance)")
    found = conn.execute(
        "SELECT doc, col, term, count(*) FROM temp.route_instances WHERE doc > ? GROUP BY doc, col, term", (after_id,)
    )
    return rows_from_instances((doc, _COLUMN[col], term, n) for doc, col, term, n in found)


def _decision(r: Sequence[Any]) -> DecisionRecord:
    values = list(r)
    try:
        values[_ALTERNATIVES] = [str(a) for a in json.loads(r[_ALTERNATIVES])]
    except (ValueError, TypeError):
        values[_ALTERNATIVES] = []
    return DecisionRecord(**{f.name: v for f, v in zip(fields(DecisionRecord), values, strict=True)})


_UNSETTLED = (
    "SELECT d.id, d.session_label, q.status, q.turn_id, q.error FROM route_decisions d"
    " JOIN queue_items q ON q.message_id = d.message_id"
    " WHERE d.outcome_at IS NULL AND d.message_id IS NOT NULL AND q.status IN ('delivered', 'failed', 'dropped')"
)


def _settle(conn: sqlite3.Connection) -> int:
    """Outcomes of decisions whose message is finished: the consuming turn's status, tokens and cost, and
    how many turns the conversation has had since (the session head's depth minus the turn's, plus one)."""
    settled = 0
    for decision_id, label, item_status, turn_id, _error in conn.execute(_UNSETTLED).fetchall():
        status, turns, tokens, cost = item_status, 0, 0, 0.0
        if turn_id is not None:
            row = conn.execute(
                "SELECT status, total_tokens, COALESCE(cost, 0), seq FROM turns WHERE id = ?", (turn_id,)
            ).fetchone()
            head = conn.execute(
                "SELECT t.seq FROM sessions s JOIN turns t ON t.id = s.thread_id WHERE s.label = ?", (label,)
            ).fetchone()
            if row is not None:
                status, tokens, cost = row[0], int(row[1]), float(row[2])
                turns = max(1, int(head[0]) - int(row[3]) + 1) if head is not None else 1
        conn.execute(
            "UPDATE route_decisions SET outcome_status = ?, outcome_turns = ?, outcome_tokens = ?, outcome_cost = ?,"
            " outcome_at = ? WHERE id = ?",
            (status, turns, tokens, cost, _now_ms(), decision_id),
        )
        settled += 1
    return settled
