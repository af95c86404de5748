"""``Ledger``: the Agents Ledger on SQLite (sessions as pointers into a tree of turns).

All methods are synchronous and short (one small transaction each) on stdlib ``sqlite3``;
an asyncio caller can run the big ones (``history`` of a very long session, imports) in
``asyncio.to_thread``. Several processes may open the same file at once. The turn lifecycle
(open, journal, write, recover) is inherited from ``_lifecycle.TurnLifecycle``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nexus.ledger import _queue, _read, _sessions, _window
from nexus.ledger._decode import gc_paused
from nexus.ledger._lifecycle import TurnLifecycle
from nexus.ledger._rows import fetch_session, fetch_turn, turn_position
from nexus.ledger._sessions import NewSession
from nexus.ledger._sqlite import Database
from nexus.ledger._ulid import new_ulid
from nexus.ledger._write import move_pointer
from nexus.ledger.errors import TurnStateError
from nexus.ledger.records import (
    CLOSED_STATUSES,
    CompactionRecord,
    ImportResult,
    QueueItem,
    Session,
    StoredMessage,
    TimelineEntry,
    ToolCallRecord,
    Turn,
)
from nexus.llm.types import Message, now_ms


def default_db_path() -> Path:
    """``$NEXUS_HOME/agents.db`` (``NEXUS_HOME`` defaults to ``~/.nexus``): where the ledger lives."""
    home = os.environ.get("NEXUS_HOME") or str(Path.home() / ".nexus")
    return Path(home).expanduser() / "agents.db"


DEFAULT_MESSAGE_CACHE = 50_000
"""Messages a :class:`Ledger` keeps decoded by default (about 0.7 KB each): a long-lived process
(broker, chat) then pays only for the new turn on each ``history()`` call."""


class Ledger(TurnLifecycle):
    """The Agents Ledger: write turns, read histories, fork and move session pointers.

    Invariants (docs/ledger.md lists the test proving each): a turn is written whole or not
    at all; nothing is deleted; a session moves only to a finished turn and every move is
    logged; a write whose parent is no longer the session head raises
    :class:`~nexus.ledger.errors.HeadMovedError` instead of forking silently.
    """

    def __init__(self, db: Database, *, message_cache: int = DEFAULT_MESSAGE_CACHE) -> None:
        self._db = db
        self._cache = _read.MessageCache(message_cache) if message_cache > 0 else None
        self._windows = _window.WindowCache(message_cache) if message_cache > 0 else None

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, synchronous: str = "NORMAL", message_cache: int = DEFAULT_MESSAGE_CACHE
    ) -> Ledger:
        """Open (creating and migrating if needed) the ledger at ``path`` (default: :func:`default_db_path`).

        ``":memory:"`` gives a private in-memory ledger for tests. ``synchronous="FULL"``
        makes every commit survive power loss too, at the cost of one fsync per turn.
        ``message_cache=N`` (default :data:`DEFAULT_MESSAGE_CACHE`; 0 turns it off) keeps up to N
        decoded messages, so repeated ``history()`` calls only read and decode new turns. Each
        call returns a new list, but the message objects in it are shared between calls: treat
        them as read-only (``dataclasses.replace`` one before changing it).
        """
        db = Database(default_db_path() if path is None else path, synchronous=synchronous)
        return cls(db, message_cache=message_cache)

    @property
    def path(self) -> str:
        """The database file (or ``:memory:``)."""
        return self._db.path

    @property
    def database(self) -> Database:
        """The underlying connection wrapper (for tools and tests)."""
        return self._db

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions

    def create_session(
        self,
        label: str | None = None,
        *,
        origin: str = "user",
        persona_id: str | None = None,
        is_subagent: bool = False,
        parent_session_label: str | None = None,
        parent_turn_id: str | None = None,
        spawn_tool_call_id: str | None = None,
        task_description: str | None = None,
        task_status: str | None = None,
        routing_key: str | None = None,
        origin_session_id: str | None = None,
        head_turn_id: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        """Create a session (label defaults to ``session-<ulid>``); raises ``SessionExistsError`` on a taken name."""
        new = NewSession(
            label or f"session-{new_ulid().lower()}",
            origin,
            persona_id,
            is_subagent,
            parent_session_label,
            parent_turn_id,
            spawn_tool_call_id,
            task_description,
            task_status,
            routing_key,
            origin_session_id,
            head_turn_id,
            metadata,
        )
        return self._db.write(lambda c: _sessions.create(c, new))

    def get_session(self, label: str) -> Session:
        """The session with exactly this label; raises ``SessionNotFound``."""
        return self._db.read(lambda c: fetch_session(c, label))

    def resolve_session(self, label_or_alias: str) -> Session:
        """Look a session up by label, then by alias; raises ``SessionNotFound``."""
        return self._db.read(lambda c: _sessions.resolve(c, label_or_alias))

    def ensure_session(self, name: str, **create_kwargs: Any) -> Session:
        """Label -> alias -> create: the lookup order the spec gives for incoming messages.

        An existing session (the usual case, once per run) is found in a read transaction; only a
        miss takes the write lock, and it looks again under the lock before creating.
        """
        try:
            return self._db.read(lambda c: _sessions.resolve(c, name))
        except LookupError:
            pass

        def run(conn: Any) -> Session:
            try:
                return _sessions.resolve(conn, name)
            except LookupError:
                return _sessions.create(conn, NewSession(name, **create_kwargs))

        return self._db.write(run)

    def add_alias(self, alias: str, session_label: str, *, reason: str = "manual") -> None:
        """Make ``alias`` another name of a session (reason: identity_promotion, identity_merge, manual)."""
        self._db.write(lambda c: _sessions.add_alias(c, alias, session_label, reason))

    def aliases(self, session_label: str) -> list[str]:
        """The aliases of a session; raises ``SessionNotFound`` for an unknown label."""
        return self._db.read(lambda c: _sessions.aliases(c, session_label))

    def list_sessions(
        self,
        *,
        status: str | None = None,
        origin: str | None = None,
        is_subagent: bool | None = None,
        updated_since: int | None = None,
        persona_id: str | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        """Sessions matching all given filters, most recently updated first."""
        return self._db.read(
            lambda c: _sessions.list_sessions(
                c,
                status=status,
                origin=origin,
                is_subagent=is_subagent,
                updated_since=updated_since,
                persona_id=persona_id,
                limit=limit,
            )
        )

    def archive(self, session_label: str) -> None:
        """Mark a session archived (hidden from default lists; nothing is ever deleted)."""
        self._db.write(lambda c: _sessions.set_fields(c, session_label, status="archived"))

    def restore(self, session_label: str) -> None:
        """Make an archived session active again (listed by default once more)."""
        self._db.write(lambda c: _sessions.set_fields(c, session_label, status="active"))

    def update_session_metadata(self, session_label: str, **values: object) -> Session:
        """Merge ``values`` into the session's ``metadata`` (``None`` removes a key), e.g. its display ``title``;
        returns the session as stored. The label, the pointer and every turn stay as they are."""

        def run(conn: Any) -> Session:
            _sessions.update_metadata(conn, session_label, values)
            return _sessions.resolve(conn, session_label)

        return self._db.write(run)

    def set_task_status(self, session_label: str, task_status: str) -> None:
        """Update a sub-agent session's ``task_status`` (pending, running, completed, failed)."""
        self._db.write(lambda c: _sessions.set_fields(c, session_label, task_status=task_status))

    # ------------------------------------------------------------------ reading

    def head(self, session_label: str) -> Turn | None:
        """The session's head turn, or ``None`` for an empty session."""

        def run(conn: Any) -> Turn | None:
            head = _sessions.resolve(conn, session_label).thread_id
            return None if head is None else fetch_turn(conn, head)

        return self._db.read(run)

    def history(self, session_label: str, *, max_chars: int | None = None) -> list[Message]:
        """The messages to send to the model next (compaction summary first, if any).

        ``max_chars`` bounds it to a window: only the newest whole turns whose stored message bodies
        hold at least that many characters (or all of them, if fewer) follow the summary. The cost
        is then that of the window, however long the ancestry (docs/ledger.md "The engine's window").
        """

        def run(conn: Any) -> list[Message]:
            row = conn.execute("SELECT thread_id FROM sessions WHERE label = ?", (session_label,)).fetchone()
            head = row[0] if row is not None else _sessions.resolve(conn, session_label).thread_id
            if max_chars is not None:
                return _window.history_window(conn, head, max_chars, self._windows)
            if self._cache is not None:
                return _read.history_cached(conn, head, self._cache)
            return _read.history(conn, head)

        with gc_paused():  # the row tuples of a long history would trigger full collections
            return self._db.read(run)

    def history_at(self, turn_id: str, *, max_chars: int | None = None) -> list[Message]:
        """The history as it would be with ``turn_id`` as head (any closed turn); ``max_chars`` as in :meth:`history`.

        An open turn raises ``TurnStateError``: it is in no history until it is closed (and
        its half-written rows must never reach the message cache).
        """

        def run(conn: Any) -> list[Message]:
            _check_closed(conn, turn_id)
            if max_chars is not None:
                return _window.history_window(conn, turn_id, max_chars, self._windows)
            if self._cache is not None:
                return _read.history_cached(conn, turn_id, self._cache)
            return _read.history(conn, turn_id)

        with gc_paused():
            return self._db.read(run)

    def ancestry(self, turn_id: str) -> list[str]:
        """Turn ids from the root to ``turn_id`` inclusive."""
        return self._db.read(lambda c: _read.ancestry(c, turn_id))

    def turns(self, session_label: str, *, limit: int | None = None) -> list[Turn]:
        """The turns of a session's history, root first; with ``limit``, only the newest ``limit`` of them."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be zero or more, got {limit}")

        def run(conn: Any) -> list[Turn]:
            head = _sessions.resolve(conn, session_label).thread_id
            return [] if head is None else _read.path_turns(conn, head, limit)

        return self._db.read(run)

    def tree(self, session_label: str, *, limit: int = 5000) -> tuple[list[Turn], bool]:
        """Every closed turn of the tree the session is in (forks too), oldest first, and whether ``limit`` cut it."""
        from nexus.ledger._tree import tree_turns

        def run(conn: Any) -> tuple[list[Turn], bool]:
            head = _sessions.resolve(conn, session_label).thread_id
            return ([], False) if head is None else tree_turns(conn, head, limit)

        return self._db.read(run)

    def get_turn(self, turn_id: str) -> Turn:
        """One turn; raises ``TurnNotFound``."""
        return self._db.read(lambda c: fetch_turn(c, turn_id))

    def children(self, turn_id: str) -> list[Turn]:
        """The direct children of a turn (continuations and forks)."""
        return self._db.read(lambda c: _read.children(c, turn_id))

    def messages(self, turn_id: str) -> list[StoredMessage]:
        """The stored messages of one turn (query first), with ids for UIs."""
        return self._db.read(lambda c: _read.turn_messages(c, turn_id))

    def get_message(self, message_id: int) -> StoredMessage:
        """One message by id; raises ``TurnNotFound``."""
        return self._db.read(lambda c: _read.get_message(c, message_id))

    def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The tool calls of one turn, with arguments and results."""
        return self._db.read(lambda c: _read.tool_calls(c, turn_id))

    def compaction(self, turn_id: str) -> CompactionRecord | None:
        """The compaction details of a compaction turn (``None`` for a normal turn)."""
        return self._db.read(lambda c: _read.compaction(c, turn_id))

    # ------------------------------------------------------------------ pointers

    def fork(self, turn_id: str, label: str | None = None, **create_kwargs: Any) -> Session:
        """A new session (``origin='fork'``) whose head is ``turn_id``; nothing is copied."""

        def run(conn: Any) -> Session:
            _check_closed(conn, turn_id)
            new = NewSession(
                label or f"fork-{new_ulid().lower()}", origin="fork", head_turn_id=turn_id, **create_kwargs
            )
            return _sessions.create(conn, new, reason="fork")

        return self._db.write(run)

    def move_pointer(self, session_label: str, turn_id: str | None) -> None:
        """Point a session at any finished turn (or ``None``: empty); the move is logged."""

        def run(conn: Any) -> None:
            label = _sessions.resolve_label(conn, session_label)
            if turn_id is not None:
                _check_closed(conn, turn_id)
            move_pointer(conn, label, turn_id, "move", now_ms())

        self._db.write(run)

    def head_at(self, session_label: str, time_ms: int) -> Turn | None:
        """The head the session had at ``time_ms`` (from its pointer log)."""

        def run(conn: Any) -> Turn | None:
            head = _sessions.head_at(conn, _sessions.resolve_label(conn, session_label), time_ms)
            return None if head is None else fetch_turn(conn, head)

        return self._db.read(run)

    def timeline(self, session_label: str) -> list[TimelineEntry]:
        """Every pointer move of a session, oldest first."""
        return self._db.read(lambda c: _sessions.timeline(c, _sessions.resolve_label(c, session_label)))

    def sessions_containing(self, turn_id: str) -> list[str]:
        """Labels of the sessions whose current history includes ``turn_id``."""

        def run(conn: Any) -> list[str]:
            seg, seq, _ = turn_position(conn, turn_id)
            cache: dict[int, tuple[int | None, int]] = {}
            rows = conn.execute("SELECT label, thread_id FROM sessions WHERE thread_id IS NOT NULL ORDER BY label")
            return [str(lbl) for lbl, head in rows.fetchall() if _read.contains(conn, head, seg, seq, cache)]

        return self._db.read(run)

    # ------------------------------------------------------------------ durable queue rows

    def enqueue(
        self, session_label: str, message: object, *, mode: str, metadata: dict[str, object] | None = None
    ) -> QueueItem:
        """Store a message for a session's queue (``message`` is any JSON value, e.g. a serialised message)."""
        return self._db.write(lambda c: _queue.enqueue(c, session_label, message, mode, metadata))

    def pending_queue_items(self, session_label: str | None = None) -> list[QueueItem]:
        """Items still ``queued`` or ``processing``, oldest first: what to reload after a restart."""
        return self._db.read(lambda c: _queue.pending(c, session_label))

    def update_queue_item(
        self, item_id: str, status: str, *, turn_id: str | None = None, error: str | None = None
    ) -> QueueItem:
        """Move a queue item on (``processing``, ``delivered``, ``failed``, ``dropped``); finished items are final."""
        return self._db.write(lambda c: _queue.update(c, item_id, status, turn_id, error))

    # ------------------------------------------------------------------ pi files

    def import_pi(self, path: str | Path, label: str | None = None) -> ImportResult:
        """Import a pi-coding-agent session file (see :func:`nexus.ledger.pi_jsonl.import_pi_session`)."""
        from nexus.ledger.pi_jsonl import import_pi_session

        return import_pi_session(self, path, label)

    def export_pi(self, session_label: str, path: str | Path) -> Path:
        """Export a session's history as a pi session file (see :func:`nexus.ledger.pi_jsonl.export_pi_session`)."""
        from nexus.ledger.pi_jsonl import export_pi_session

        return export_pi_session(self, session_label, path)


def _check_closed(conn: Any, turn_id: str) -> None:
    status = turn_position(conn, turn_id)[2]
    if status not in CLOSED_STATUSES:
        raise TurnStateError(f"turn {turn_id!r} is still open ({status}); only finished turns can be session heads")
