"""The SQL backends' :class:`~nexus.ledger.protocols.TurnStore` (and ``TurnTree``): the turn tree's
writes and reads, each one transaction on a :class:`~nexus.ledger._sql_db.SqlDatabase`.

The SQL of each step is in ``_turns``/``_write`` (writes) and ``_read``/``_window``/``_tree`` (reads);
``_owners`` decides which open turns are orphans, ``_crash`` closes them. Decoded messages are kept in two caches (whole
histories, windows): rows of finished turns never change, so a long-lived process decodes only new turns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from nexus.ledger import _crash, _owners, _prompts, _read, _rescue, _sessions, _turn_ops, _window
from nexus.ledger._decode import OriginIds, gc_paused
from nexus.ledger._rows import TURN_COLUMNS, fetch_turn, turn_from_row, turn_position
from nexus.ledger._schema import OPEN_TURNS
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger._sqlite import wait_bound
from nexus.ledger._write import WrittenRows
from nexus.ledger.errors import LedgerBusyError, LedgerFullError, TurnStateError
from nexus.ledger.records import (
    CLOSED_STATUSES,
    CompactionRecord,
    JournalEntry,
    StoredMessage,
    ToolCallRecord,
    Turn,
    TurnOpen,
    TurnWrite,
)
from nexus.llm import Message

JOURNAL_WAIT_S = 1.0
"""The longest a crash-journal write waits for a database held by another process: the journal is
best effort (the run goes on without it), the final write waits the full ``NEXUS_DB_WAIT_S``."""

_OPEN = OPEN_TURNS

Via = Callable[[Callable[[Any], str]], Awaitable[str]]
"""Runs a turn write's transaction function where it commits with others and returns its result (see ``write``)."""


def journal_wait() -> float:
    """:data:`JOURNAL_WAIT_S`, or less if ``NEXUS_DB_WAIT_S`` asks for a shorter wait."""
    return min(JOURNAL_WAIT_S, wait_bound())


_KNOWN_PROMPTS = 64
"""System prompts a turn store remembers as written (the engine keeps as many distinct composed prompts)."""

_KEPT_TURNS = 256
"""Turns whose message rows a store keeps from their open to their read-back (more than the runs in flight;
past it they are all forgotten, and a read-back reads)."""


class SqlTurnStore:
    """Turns of one SQL ledger database (see the module docstring)."""

    def __init__(self, db: SqlDatabase, *, message_cache: int) -> None:
        self._db = db
        self.cache = _read.MessageCache(message_cache) if message_cache > 0 else None
        self.windows = _window.WindowCache(message_cache) if message_cache > 0 else None
        self._prompts: dict[str, str] = {}
        """System prompts this store committed (text -> hash): an agent sends the same one turn after turn
        (one shared string), which was hashed and written again per turn. Rows are never deleted."""
        self._origins = OriginIds()
        self._kept: dict[str, tuple[WrittenRows, bool]] = {}
        """turn id -> the message rows this store committed for it, and whether they are all of them (it wrote
        the turn): the run's result reads the turn's messages right after writing it, and got them back by a
        read transaction per turn; rows of a finished turn never change, so the kept rows are what it would read."""

    # ------------------------------------------------------------------ the lifecycle

    async def open(self, turn: TurnOpen) -> str:
        """Store a ``streaming`` turn and its query; the session pointer does not move."""
        owner, rows = _owners.owner(), WrittenRows()
        opened = await self._db.run_write(
            lambda c: _turn_ops.open_in(c, turn, owner, self._prompts, rows.attempt()), row_locks=True
        )
        self._keep(opened, rows, whole=False)
        prompt, key = turn.system_prompt, turn.details.system_prompt_hash
        if prompt is not None and key is not None and prompt not in self._prompts:  # committed: known from now on
            if len(self._prompts) >= _KNOWN_PROMPTS:
                self._prompts.clear()
            self._prompts[prompt] = key
        return opened

    async def journal(self, entries: Sequence[JournalEntry]) -> None:
        """Journal entries of open turns in one transaction (an entry of a closed turn fails them all)."""
        rows = _turn_ops.journal_rows(entries)
        if rows:
            await self._db.run_write(lambda c: _turn_ops.journal_in(c, rows), wait_s=journal_wait(), row_locks=True)

    async def write(self, turn: TurnWrite, *, via: Via | None = None) -> str:
        """Write a finished turn in one transaction and move the pointer; a failed final write of an
        opened turn saves its outcome to a rescue file (``TurnNotSavedError`` names it).

        ``via``: what runs the transaction's function instead of a transaction of its own (the queue's
        :meth:`~nexus.ledger._queue_store.SqlQueueStore.grouped`, for a broker's turn); it returns once that
        committed. This store's memory of what is written (origins, prompts, kept rows) is updated only then."""
        _turn_ops.check_write(turn)
        rows = WrittenRows()
        try:
            origins = self._origins.write()

            def fn(conn: Any) -> str:
                return _turn_ops.write_in(conn, turn, origins, rows)

            written = await (self._db.run_write(fn, row_locks=True) if via is None else via(fn))
        except (LedgerFullError, LedgerBusyError) as exc:
            if turn.turn_id is None:
                raise
            raise _turn_ops.rescued(self._db.location, turn, exc) from exc
        origins.committed()
        opened = self._kept.pop(written, None) if turn.turn_id is not None else None
        if opened is not None:  # opened here (a run's turn, read back next): its query rows, then the rest
            opened[0].rows.extend(rows.rows)
            opened[0].origins.update(rows.origins)
            self._keep(written, opened[0], whole=True)
        return written

    def _keep(self, turn_id: str, rows: WrittenRows, *, whole: bool) -> None:
        """Keep the committed message rows of ``turn_id`` (bounded: see :data:`_KEPT_TURNS`)."""
        if len(self._kept) >= _KEPT_TURNS:
            self._kept.clear()
        self._kept[turn_id] = (rows, whole)

    async def recover(
        self, *, force: bool = False, session: str | None = None, turn_ids: Sequence[str] | None = None
    ) -> list[str]:
        """Close turns left open by dead processes (every open turn if ``force``, exactly ``turn_ids`` if given).

        A turn whose final write failed and was saved to a rescue file is closed from that file, with
        the status it really ended with; the others as ``aborted`` with what they journaled.
        """
        rows = await self._db.run_read(
            lambda c: c.execute(
                f"SELECT id, owner FROM turns WHERE {_OPEN} AND (CAST(? AS TEXT) IS NULL OR session_label = ?)"
                " ORDER BY id",
                (session, session),
            ).fetchall()
        )
        recovered: list[str] = []
        for turn_id, turn_owner in rows:
            if turn_ids is not None:
                if turn_id not in turn_ids:
                    continue
            elif not force and not _owners.owner_dead(turn_owner):
                continue
            if await self._recover_one(str(turn_id), turn_owner):
                recovered.append(str(turn_id))
        return recovered

    async def _recover_one(self, turn_id: str, turn_owner: str | None) -> bool:
        """Close one orphaned turn, from its rescue file if it left one; False if it was closed meanwhile."""
        location = self._db.location
        rescue = _rescue.find(location, turn_id) if location != ":memory:" else None
        if rescue is not None and (saved := _rescue.load(rescue)) is not None:
            label, _ = await self._db.run_write(lambda c: _crash.finish_rescued(c, turn_id, saved), row_locks=True)
            if label:
                _rescue.discard(rescue)
            return bool(label)
        note = (
            f"the process running this turn ({turn_owner or 'unknown'}) stopped before finishing it; "
            "closed when the ledger was next opened"
        )
        label, _ = await self._db.run_write(lambda c: _crash.recover_turn(c, turn_id, note), row_locks=True)
        return bool(label)

    async def open_turns(self, session: str | None = None) -> list[Turn]:
        """Turns still open (being run, or left by a dead process until recovered), oldest first."""
        rows = await self._db.run_read(
            lambda c: c.execute(
                f"SELECT {TURN_COLUMNS}, owner FROM turns WHERE {_OPEN}"
                " AND (CAST(? AS TEXT) IS NULL OR session_label = ?) ORDER BY id",
                (session, session),
            ).fetchall()
        )
        return [turn_from_row(row[:-1], owner=row[-1]) for row in rows]

    def rescue_file(self, turn_id: str) -> Path | None:
        """Where the reply of open turn ``turn_id`` is kept because its final write failed, or None.

        A reading command that cannot close the turn (the disk is still full) says where the reply is:
        the turn shows as open, with nothing in it, until a command can write it.
        """
        location = self._db.location
        return _rescue.find(location, turn_id) if location != ":memory:" else None

    # ------------------------------------------------------------------ reads

    async def get(self, turn_id: str) -> Turn:
        """One turn; raises ``TurnNotFound``."""
        return await self._db.run_read(lambda c: fetch_turn(c, turn_id))

    async def history(self, session_label: str, *, max_chars: int | None = None) -> list[Message]:
        """The messages to send to the model next (summary first); ``max_chars`` bounds it to a window."""
        return (await self.head_history(session_label, max_chars=max_chars))[2]

    async def head_history(
        self, session_label: str, *, max_chars: int | None = None
    ) -> tuple[str, str | None, list[Message]]:
        """The session's exact label, its head turn id and :meth:`history`, in one read transaction (context
        assembly needs all three: it read the session, then the history from the head it named)."""

        def run(conn: Any) -> tuple[str, str | None, list[Message]]:
            row = conn.execute("SELECT thread_id FROM sessions WHERE label = ?", (session_label,)).fetchone()
            if row is not None:
                label, head = session_label, row[0]
            else:
                found = _sessions.resolve(conn, session_label)
                label, head = found.label, found.thread_id
            return label, head, self._history(conn, head, max_chars)

        with gc_paused():  # the row tuples of a long history would trigger full collections
            return await self._db.run_read(run)

    async def history_at(self, turn_id: str, *, max_chars: int | None = None) -> list[Message]:
        """The history with ``turn_id`` as head (an open turn raises ``TurnStateError``)."""

        def run(conn: Any) -> list[Message]:
            check_closed(conn, turn_id)
            return self._history(conn, turn_id, max_chars)

        with gc_paused():
            return await self._db.run_read(run)

    def _history(self, conn: Any, head: str | None, max_chars: int | None) -> list[Message]:
        if max_chars is not None:
            return _window.history_window(conn, head, max_chars, self.windows)
        if self.cache is not None:
            return _read.history_cached(conn, head, self.cache)
        return _read.history(conn, head)

    async def path(self, session_label: str, *, limit: int | None = None) -> list[Turn]:
        """The turns of a session's history, root first; with ``limit``, only the newest ``limit``."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be zero or more, got {limit}")

        def run(conn: Any) -> list[Turn]:
            head = _sessions.resolve(conn, session_label).thread_id
            return [] if head is None else _read.path_turns(conn, head, limit)

        return await self._db.run_read(run)

    async def messages(self, turn_id: str) -> list[StoredMessage]:
        """The stored messages of one turn (query first), with ids for UIs.

        A turn this store has just written is answered from the rows it wrote (once; see ``_kept``)."""
        kept = self._kept.get(turn_id)
        if kept is not None and kept[1] and self._kept.pop(turn_id, None) is kept:
            return [_read.stored_message(turn_id, row, kept[0].origins) for row in kept[0].rows]
        return await self._db.run_read(lambda c: _read.turn_messages(c, turn_id))

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The tool calls of one turn, with arguments and results."""
        return await self._db.run_read(lambda c: _read.tool_calls(c, turn_id))

    async def compaction(self, turn_id: str) -> CompactionRecord | None:
        """The compaction details of a compaction turn (``None`` for a normal turn)."""
        return await self._db.run_read(lambda c: _read.compaction(c, turn_id))

    # ------------------------------------------------------------------ the tree (optional capability)

    async def ancestry(self, turn_id: str) -> list[str]:
        """Turn ids from the root to ``turn_id`` inclusive."""
        return await self._db.run_read(lambda c: _read.ancestry(c, turn_id))

    async def children(self, turn_id: str) -> list[Turn]:
        """The direct children of a turn (continuations and forks)."""
        return await self._db.run_read(lambda c: _read.children(c, turn_id))

    async def tree(self, session_label: str, *, limit: int = 5000) -> tuple[list[Turn], bool]:
        """Every closed turn of the tree the session is in (forks too), oldest first, and whether ``limit`` cut it."""
        from nexus.ledger._tree import tree_turns

        def run(conn: Any) -> tuple[list[Turn], bool]:
            head = _sessions.resolve(conn, session_label).thread_id
            return ([], False) if head is None else tree_turns(conn, head, limit)

        return await self._db.run_read(run)

    async def message(self, message_id: int) -> StoredMessage:
        """One message by id; raises ``TurnNotFound``."""
        return await self._db.run_read(lambda c: _read.get_message(c, message_id))

    async def system_prompt(self, prompt_hash: str) -> str | None:
        """The system prompt a turn was sent, by its ``system_prompt_hash`` (None if unknown)."""
        return await self._db.run_read(lambda c: _prompts.read_prompt(c, prompt_hash))


def check_closed(conn: Any, turn_id: str) -> None:
    """``TurnStateError`` unless the turn is finished: only a finished turn can be a head or a history's end."""
    status = turn_position(conn, turn_id)[2]
    if status not in CLOSED_STATUSES:
        raise TurnStateError(f"turn {turn_id!r} is still open ({status}); only finished turns can be session heads")
