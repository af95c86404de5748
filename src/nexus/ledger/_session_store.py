"""The SQL backends' :class:`~nexus.ledger.protocols.SessionStore` (and ``PointerLog``): sessions as
named, movable pointers into the turn tree, their aliases and the log of every pointer move.

The SQL is in ``_sessions`` (rows) and ``_write.move_pointer`` (a move and its log row).
"""

from __future__ import annotations

import builtins
from typing import Any

from nexus.ledger import _read, _sessions
from nexus.ledger._rows import fetch_session, fetch_turn, turn_position
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger._turn_store import check_closed
from nexus.ledger._write import move_pointer
from nexus.ledger.records import NewSession, Session, SessionQuery, TimelineEntry, Turn
from nexus.llm import now_ms


class SqlSessionStore:
    """Sessions of one SQL ledger database (see the module docstring)."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    async def create(self, session: NewSession) -> Session:
        """Create a session (or a fork: ``origin="fork"`` and a finished ``head_turn_id``)."""
        return await self._db.run_write(lambda c: _sessions.create(c, session))

    async def get(self, label: str) -> Session:
        """The session with exactly this label; raises ``SessionNotFound``."""
        return await self._db.run_read(lambda c: fetch_session(c, label))

    async def resolve(self, label_or_alias: str) -> Session:
        """Look a session up by label, then by alias; raises ``SessionNotFound``."""
        return await self._db.run_read(lambda c: _sessions.resolve(c, label_or_alias))

    async def ensure(self, session: NewSession) -> Session:
        """Label -> alias -> create. An existing session (the usual case) is found in a read; only a
        miss takes the write lock, and it looks again under the lock before creating."""
        if session.label is not None:
            label = session.label
            try:
                return await self._db.run_read(lambda c: _sessions.resolve(c, label))
            except LookupError:
                pass
        return await self._db.run_write(lambda c: _sessions.ensure(c, session))

    async def list(self, query: SessionQuery = SessionQuery()) -> builtins.list[Session]:
        """Sessions matching every filter of ``query``, most recently updated first."""
        return await self._db.run_read(lambda c: _sessions.list_sessions(c, query))

    async def update(
        self,
        label: str,
        *,
        status: str | None = None,
        task_status: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        """Set a session's ``status`` (``archived`` hides it from default lists) and/or ``task_status``, and
        merge ``metadata`` into its metadata (a ``None`` value removes that key), in one transaction."""
        values = {key: value for key, value in (("status", status), ("task_status", task_status)) if value is not None}

        def run(conn: Any) -> None:
            if values:
                _sessions.set_fields(conn, label, **values)
            if metadata:
                _sessions.merge_metadata(conn, label, metadata)

        if values or metadata:
            await self._db.run_write(run)

    async def add_alias(self, alias: str, session_label: str, *, reason: str = "manual") -> None:
        """Make ``alias`` another name of a session (identity_promotion, identity_merge, manual)."""
        await self._db.run_write(lambda c: _sessions.add_alias(c, alias, session_label, reason))

    async def aliases(self, session_label: str) -> builtins.list[str]:
        """The aliases of a session; raises ``SessionNotFound`` for an unknown label."""
        return await self._db.run_read(lambda c: _sessions.aliases(c, session_label))

    async def head(self, session_label: str) -> Turn | None:
        """The session's head turn, or ``None`` for an empty session."""

        def run(conn: Any) -> Turn | None:
            head = _sessions.resolve(conn, session_label).thread_id
            return None if head is None else fetch_turn(conn, head)

        return await self._db.run_read(run)

    async def move_pointer(self, session_label: str, turn_id: str | None) -> None:
        """Point a session at any finished turn (or ``None``: empty); the move is logged."""

        def run(conn: Any) -> None:
            label = _sessions.resolve_label(conn, session_label)
            if turn_id is not None:
                check_closed(conn, turn_id)
            move_pointer(conn, label, turn_id, "move", now_ms())

        await self._db.run_write(run)

    # ------------------------------------------------------------------ the pointer log (optional capability)

    async def timeline(self, session_label: str) -> builtins.list[TimelineEntry]:
        """Every pointer move of a session, oldest first."""
        return await self._db.run_read(lambda c: _sessions.timeline(c, _sessions.resolve_label(c, session_label)))

    async def head_at(self, session_label: str, time_ms: int) -> Turn | None:
        """The head the session had at ``time_ms`` (from its pointer log)."""

        def run(conn: Any) -> Turn | None:
            head = _sessions.head_at(conn, _sessions.resolve_label(conn, session_label), time_ms)
            return None if head is None else fetch_turn(conn, head)

        return await self._db.run_read(run)

    async def containing(self, turn_id: str) -> builtins.list[str]:
        """Labels of the sessions whose current history includes ``turn_id``."""

        def run(conn: Any) -> builtins.list[str]:
            seg, seq, _ = turn_position(conn, turn_id)
            cache: dict[int, tuple[int | None, int]] = {}
            rows = conn.execute("SELECT label, thread_id FROM sessions WHERE thread_id IS NOT NULL ORDER BY label")
            return [str(lbl) for lbl, head in rows.fetchall() if _read.contains(conn, head, seg, seq, cache)]

        return await self._db.run_read(run)
