"""The SQL backends' :class:`~nexus.ledger.protocols.QueueStore` (and ``QueueFeed``): the broker's durable
queue, accepts and claims grouped into shared transactions.

Every accept must be durable before it returns, and a run's claim before it starts; one committed
transaction per write caps a single writer at a few thousand a second. Accepts and claims that arrive
in the same event-loop iteration are committed together: the first schedules a flush with
``call_soon``, the rest join it, and each caller resumes once the shared transaction committed. On
SQLite the flush commits inline in that callback; on a database reached over the network it runs as
a task, and writes arriving meanwhile form the next group. If one write of a group fails (a claim of a
finished item), the group is run again with a savepoint per write, so that write fails alone. A broker's
turn write joins the group too (:meth:`SqlQueueStore.grouped`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from nexus._dataclass import dataclass
from nexus._settled import Unstoppable, settled
from nexus.ledger import _queue_reads
from nexus.ledger._leases import notify_ready_in
from nexus.ledger._queue_reads import Arriving, Held
from nexus.ledger._queue_rows import (
    accept_at,
    accept_many_at,
    claim_in,
    deliver_in,
    free_message_ids_in,
    move_items,
    owe_overflow_in,
    owed_overflow_in,
    release_in,
    take_overflow_in,
)
from nexus.ledger._rows import is_postgres
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger.errors import LedgerBusyError, LedgerError, LedgerFullError
from nexus.ledger.records import AcceptRequest, Lease, QueueItem, Settlement
from nexus.llm import now_ms

T = TypeVar("T")

MAX_GROUP = 512
"""Writes per transaction at most, so one flush never holds the event loop for long."""


@dataclass(slots=True)
class _Write:
    """One submitted accept (``request``), claim (``claim``, under ``lease`` if given) or settle (``move``: a
    settle or release, fenced already), and the future its caller awaits."""

    future: asyncio.Future[Any]
    request: AcceptRequest | None = None
    claim: Sequence[str] = ()
    lease: Lease | None = None
    move: Callable[[Any], object] | None = None
    overflow_of: str | None = None
    """A claim's session label when the claim also takes the session's owed ``[Queue overflow]`` items."""


class SqlQueueStore:
    """The queue of one SQL ledger database (see the module docstring)."""

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db
        self._pending: list[_Write] = []
        self._scheduled = False
        self._committing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop of the writes pending now (asked by a group's first write, see :meth:`_group_loop`)."""

    # ------------------------------------------------------------------ accept and claim (grouped)

    def accept(self, request: AcceptRequest) -> Awaitable[tuple[QueueItem, bool]]:
        """Queue a message durably; ``(item, created)``, ``created`` False for a message id already accepted.

        The group's future itself is returned, not a coroutine awaiting it (one runs for every message, and each
        frame between the sender and the commit is made, entered and resumed again): the write joins the group at
        the call. ``_Write`` is built positionally: a class called with keywords builds a dict of them and unpacks
        it again."""
        return self._join(request, (), None, None)

    def claim(
        self, item_ids: Sequence[str], *, lease: Lease | None = None, overflow_of: str | None = None
    ) -> Awaitable[list[tuple[QueueItem, int]] | None]:
        """A run takes these items: ``processing``, one more attempt counted (under ``lease``: fenced by its epoch);
        with ``overflow_of``, also :meth:`take_overflow` in the claim's transaction (its outcome returned). The
        group's future itself, as :meth:`accept` returns it."""
        if not item_ids:
            return _done(None if overflow_of is None else [])
        return self._join(None, tuple(item_ids), lease, overflow_of)

    def _join(
        self, request: AcceptRequest | None, claim: tuple[str, ...], lease: Lease | None, overflow_of: str | None
    ) -> asyncio.Future[Any]:
        """An accept or a claim joins the pending group: its future (:meth:`_future` and :meth:`_submit` written out
        here, one frame instead of five: an accept and a claim run for every message)."""
        loop = self._loop
        if loop is None or not self._pending:  # see _group_loop
            loop = self._loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append(_Write(future, request, claim, lease, None, overflow_of))  # positional, see accept
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    def _future(self) -> asyncio.Future[Any]:
        return self._group_loop().create_future()

    def _group_loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, asked once a group (by its first write): the writes that join a pending group run on
        the loop that will flush it. In CPython 3.11 each ``asyncio.get_running_loop()`` is a ``getpid`` system
        call (a check against a fork), and every accept and claim made a future through it."""
        loop = self._loop
        if loop is None or not self._pending:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _submit(self, write: _Write) -> asyncio.Future[Any]:
        self._pending.append(write)
        self._schedule()
        return write.future

    def _flush(self) -> None:
        self._scheduled = False
        if self._committing:  # a networked database's group is in flight: this one follows it
            return
        group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
        if self._pending:
            self._schedule()
        if self._db.inline:  # here and now, no coroutine: this runs for every group
            _resolve(group, self._outcomes(group))
            return
        self._committing = True  # one group at a time: the next gathers meanwhile and no two conflict
        asyncio.get_running_loop().create_task(self._commit(group)).add_done_callback(self._committed)

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._group_loop().call_soon(self._flush)

    def _committed(self, _: asyncio.Task[None]) -> None:
        self._committing = False
        if self._pending:
            self._schedule()

    async def _commit(self, group: list[_Write]) -> None:
        """A networked database's group: its transactions on the database's worker, the callers told here."""
        try:
            outcomes = await self._db.run(lambda: self._outcomes(group))
        except Exception as exc:  # the worker could not run it: nothing of the group was written
            outcomes = [exc] * len(group)
        _resolve(group, outcomes)

    def _outcomes(self, group: list[_Write]) -> list[object]:
        """Commit the group in bulk (each write alone if one fails): each write's outcome, or its error."""
        db = self._db
        try:
            try:
                return db.write(lambda c: _in_bulk(c, group))
            except (LedgerBusyError, LedgerFullError):
                raise  # the database failed, not one write: every caller hears it
            except _ONE_WRITES as exc:
                if len(group) == 1:  # a group of one failed on its own write: run alone, it would meet the same refusal
                    return [exc]
                return db.write(lambda c: _one_by_one(c, group))
            except Exception:
                return db.write(lambda c: _one_by_one(c, group))
        except Exception as exc:  # nothing of the group was written: every caller hears why
            return [exc] * len(group)

    # ------------------------------------------------------------------ settling

    async def release(self, item_ids: Sequence[str], *, lease: Lease | None = None) -> None:
        """Items handed back unconsumed (a returned steer): ``queued`` again, the claim's attempt taken back."""
        if item_ids:
            await self._move(_fenced(lease, lambda c: release_in(c, item_ids)))

    async def settle(
        self,
        item_ids: Sequence[str],
        outcome: Settlement,
        *,
        turn_id: str | None = None,
        reason: str | None = None,
        lease: Lease | None = None,
        overflow_cap: int | None = None,
        refused: bool = False,
    ) -> None:
        """Finish unfinished items: ``delivered`` by ``turn_id``, or ``failed``/``dropped`` with ``reason``.

        ``overflow_cap`` (``dropped`` only: the ``summarize`` policy's cap): the items are owed to their session's
        next ``[Queue overflow]`` summary, in the same transaction (:meth:`take_overflow`). ``refused``
        (``dropped`` only): their message ids are freed in the same transaction (:func:`free_message_ids_in`)."""
        if not item_ids:
            return
        if outcome == "delivered":
            if turn_id is None:
                raise ValueError("a delivered item needs the turn_id that consumed it")
            await self._move(_fenced(lease, lambda c: deliver_in(c, item_ids, turn_id)))
        elif outcome == "dropped" and overflow_cap is not None:
            cap = overflow_cap

            def dropped_owed(conn: Any) -> None:
                move_items(conn, item_ids, "dropped", error=reason)
                owe_overflow_in(conn, item_ids, cap)

            await self._move(_fenced(lease, dropped_owed))
        elif outcome == "dropped" and refused:

            def dropped_freed(conn: Any) -> None:
                move_items(conn, item_ids, "dropped", error=reason)
                free_message_ids_in(conn, item_ids)

            await self._move(_fenced(lease, dropped_freed))
        elif outcome in ("failed", "dropped"):
            await self._move(_fenced(lease, lambda c: move_items(c, item_ids, outcome, error=reason)))
        else:
            raise ValueError(f"a queue item settles as delivered, failed or dropped, not {outcome!r}")

    async def _move(self, move: Callable[[Any], None]) -> None:
        """A settle or release, committed with the accepts and claims of its group (after them)."""
        await self._submit(_Write(self._future(), move=move))

    def grouped(self, write: Callable[[Any], T]) -> Awaitable[T]:
        """Run ``write(conn)`` in the next group's transaction, after its accepts and claims, and return what it
        returned once that committed: a broker's turn write shares the commit (its WAL frames, locks and system
        calls) with the queue writes of the same loop round instead of paying for one of its own.

        ``write`` follows the rules of a :meth:`SqlDatabase.write` function (it may run more than once). One of
        :data:`_ONE_WRITES`, or on SQLite an error of ``write``'s own code (:func:`_its_own`), fails it alone (the
        group runs again, a savepoint a write); a full or busy database
        fails every write of the group, each caller hearing it. The write joins the group at the call. Waited for
        through a cancellation of the caller (:func:`~nexus._settled.settled`: the cancellation is raised once the
        group is done, its error instead if the write failed): a caller must not go on believing a write undone
        that commits a moment later."""
        future: Unstoppable[T] = Unstoppable(loop=self._group_loop())
        self._submit(_Write(future, None, (), None, write))  # positional, as in accept
        return settled(future)

    async def take_overflow(
        self, session_label: str, batch: Sequence[str], *, lease: Lease | None = None
    ) -> list[tuple[QueueItem, int]]:
        """The items the ``summarize`` policy dropped that a turn of the messages ``batch`` of ``session_label``
        owes a ``[Queue overflow]`` summary of, oldest first, each with the cap in force: those no turn took, and
        those a turn of one of these messages took before (its retry). They are carried by ``batch[0]`` from now
        on: once it is finished, they are told (a later look clears them). A read first: a write transaction only
        when some are owed or told (under ``lease``: fenced by it)."""
        if not batch:
            return []
        owed, told = await self._db.run_read(lambda c: owed_overflow_in(c, session_label, batch))
        if not owed and not told:
            return []
        return await self._db.run_write(_fenced(lease, lambda c: take_overflow_in(c, session_label, batch)))

    async def fail_exhausted(self, max_attempts: int) -> list[QueueItem]:
        """Fail every ``processing`` item (a crash cut its run) already tried ``max_attempts`` times."""
        return await self._db.run_write(lambda c: _queue_reads.fail_exhausted(c, max_attempts))

    # ------------------------------------------------------------------ reads

    async def get(self, item_id: str) -> QueueItem | None:
        """One queue item by id, or ``None``."""
        return await self._db.run_read(lambda c: _queue_reads.get(c, item_id))

    async def get_many(self, item_ids: Sequence[str]) -> list[QueueItem | None]:
        """The items of ``item_ids`` in that order (``None`` for an unknown id), in one read."""
        if not item_ids:
            return []
        return await self._db.run_read(lambda c: _queue_reads.get_many(c, item_ids))

    async def pending(self, agent_id: str | None = None, *, session_label: str | None = None) -> list[QueueItem]:
        """Items still ``queued`` or ``processing`` (of one agent or session, or all), in arrival order."""
        return await self._db.run_read(lambda c: _queue_reads.pending(c, agent_id, session_label))

    async def items(self, *, agent_id: str | None = None, statuses: Sequence[str] = ()) -> list[QueueItem]:
        """Queue rows filtered by agent and status (all statuses when ``statuses`` is empty), oldest first."""
        return await self._db.run_read(lambda c: _queue_reads.items(c, agent_id, statuses))

    async def unanswered_replies(self) -> list[tuple[QueueItem, str]]:
        """Finished asks whose reply was never queued, each with the agent to answer."""
        return await self._db.run_read(_queue_reads.unanswered_replies)

    # ------------------------------------------------------------------ the feed (optional capability)

    async def cursor(self) -> int:
        """The newest queue row's position (0 for none): where :meth:`queued_after` starts."""
        return await self._db.run_read(_queue_reads.last_rowid)

    async def queued_after(
        self, cursor: int, held: Held | None = None, arriving: Arriving | None = None
    ) -> tuple[list[QueueItem], int]:
        """Items still ``queued`` accepted after ``cursor`` (any process), and the new cursor (see
        :meth:`nexus.ledger.protocols.QueueFeed.queued_after`)."""
        return await self._db.run_read(lambda c: _queue_reads.queued_after(c, cursor, held, arriving))


def _in_bulk(conn: Any, group: list[_Write]) -> list[object]:
    """Accepts (as one statement on PostgreSQL), claims (those without a lease as one statement), then settles;
    one clock read for the group. The writes are sorted in one pass (a group's loop runs for every message)."""
    now = now_ms()
    outcomes: list[object] = [None] * len(group)
    accepts: list[int] = []
    requests: list[AcceptRequest] = []
    leased: list[_Write] = []
    claimed: list[str] = []
    overflows: list[tuple[int, str, Sequence[str]]] = []
    moves: list[tuple[int, Callable[[Any], object]]] = []
    for index, write in enumerate(group):  # each write is an accept, a claim or a move
        if write.request is not None:
            accepts.append(index)
            requests.append(write.request)
        elif write.move is not None:
            moves.append((index, write.move))
        elif write.claim:
            if write.lease is not None:  # its own lease check and epoch
                leased.append(write)
            else:
                claimed.extend(write.claim)
            if write.overflow_of is not None:
                overflows.append((index, write.overflow_of, write.claim))
    if requests:
        for index, outcome in zip(accepts, accept_many_at(conn, requests, now), strict=True):
            outcomes[index] = outcome
    for write in leased:
        claim_in(conn, write.claim, write.lease)
    if claimed:
        claim_in(conn, claimed)
    for index, label, item_ids in overflows:  # after every claim: take_overflow reads their rows
        outcomes[index] = take_overflow_in(conn, label, item_ids)
    for index, move in moves:
        outcomes[index] = move(conn)
    _wake(conn, outcomes)
    return outcomes


def _done(value: T) -> asyncio.Future[T]:
    """A future that already holds ``value`` (a claim of nothing)."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def _resolve(group: list[_Write], outcomes: list[object]) -> None:
    """Hand every caller of the group its outcome (a caller that stopped waiting is passed over)."""
    for write, outcome in zip(group, outcomes, strict=True):
        if write.future.done():
            continue
        if isinstance(outcome, Exception):
            write.future.set_exception(outcome)
        else:
            write.future.set_result(outcome)


def _wake(conn: Any, outcomes: list[object]) -> None:
    """Notify other brokers (PostgreSQL) when the group's new items made an idle session ready."""
    if not is_postgres(conn):  # SQLite: nobody listens (asked once a group, before any item is looked at)
        return
    fresh = [o[0].session_label for o in outcomes if isinstance(o, tuple) and o[1] and isinstance(o[0], QueueItem)]
    if fresh:
        notify_ready_in(conn, fresh)


_ONE_WRITES = (LedgerError, ValueError, sqlite3.IntegrityError)
"""Errors of one write (a finished item, a lost lease, a refused session key, a constraint): that write fails
alone. Any other is the transaction's (a PostgreSQL serialization failure or lost connection, a busy SQLite):
it propagates, and the database runs the whole transaction again (caught here, a conflict failed one caller
and the broker retried its batch a second later; the full-size fault bench found it)."""


def _one_by_one(conn: Any, group: list[_Write]) -> list[object]:
    """Each write of the group under its own savepoint: one that fails is rolled back alone."""
    now = now_ms()
    outcomes: list[object] = []
    for write in group:
        conn.execute("SAVEPOINT group_op")
        try:
            if write.request is not None:
                outcomes.append(accept_at(conn, write.request, now))
            elif write.move is not None:
                outcomes.append(write.move(conn))
            else:
                claim_in(conn, write.claim, write.lease)
                owed = None if write.overflow_of is None else take_overflow_in(conn, write.overflow_of, write.claim)
                outcomes.append(owed)
        except Exception as exc:
            if not _its_own(exc, write, conn):
                raise
            conn.execute("ROLLBACK TO SAVEPOINT group_op")
            outcomes.append(exc)
        conn.execute("RELEASE SAVEPOINT group_op")
    _wake(conn, outcomes)
    return outcomes


def _its_own(exc: Exception, write: _Write, conn: Any) -> bool:
    """Whether ``exc`` fails ``write`` alone: one of :data:`_ONE_WRITES`, or any error of a settle's or a turn
    write's own code that is not the database's (a reply body that does not encode, a bug), as when the turn
    write had a transaction of its own (SQLite; on PostgreSQL such an error may be the transaction's, a
    serialization failure, which must propagate); never once SQLite ended the transaction by itself."""
    if is_postgres(conn):
        return isinstance(exc, _ONE_WRITES)
    if not conn.in_transaction:
        return False
    return isinstance(exc, _ONE_WRITES) or (write.move is not None and not isinstance(exc, sqlite3.Error))


def _fenced(lease: Lease | None, write: Callable[[Any], T]) -> Callable[[Any], T]:
    """``write`` in a transaction that first refuses (``LeaseLostError``) unless ``lease`` (if any) is still valid."""
    if lease is None:
        return write

    def under_lease(conn: Any) -> T:
        from nexus.ledger._leases import check_in

        check_in(conn, lease)
        return write(conn)

    return under_lease
