"""The ledger's database on PostgreSQL: a pool of connections, each transaction run on a worker thread.

The stores' logic is one synchronous function per transaction (``fn(conn)``, shared with SQLite). Here
each runs on a thread of :attr:`PgDatabase.executor` with a pooled psycopg connection, so a slow query, a
lost connection or a server restart holds a worker, never the event loop. Writes run ``SERIALIZABLE``:
the logic was written for SQLite's one writer at a time, and PostgreSQL then guarantees the same outcome
as some serial order or refuses the transaction (serialization failure, deadlock), which is retried whole.
The turn tree's writes are the exception (``row_locks=True``): they lock the rows their outcome depends on
(``SELECT … FOR UPDATE``: the session, the parent turn, the lease) and run ``READ COMMITTED``, so only
writes to one session wait for each other, and processes writing different sessions never refuse each other.
A connection lost before the commit is retried the same way until ``NEXUS_DB_WAIT_S`` has passed.

No session state is used (no session advisory locks, no ``SET``): each transaction names its own
isolation and its own idle and statement bounds (``SET LOCAL``, in the ``BEGIN``'s round trip), so a
transaction-pooling pgbouncer works; ``NEXUS_PG_PREPARE=0`` turns psycopg's prepared statements off for a
pgbouncer older than 1.21.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from nexus.ledger._sqlite import wait_bound
from nexus.ledger.errors import LedgerBusyError, LedgerRefusedError, LedgerUnavailableError
from nexus.ledger.postgres._in_flight import LATE_ATTEMPT_S, InFlight, StopWatch
from nexus.ledger.postgres._sql import PgConnection
from nexus.ledger.postgres._url import redacted, scrubbed

T = TypeVar("T")

log = logging.getLogger("nexus.ledger")

POOL_SIZE = 8
"""Connections (and worker threads) at most, unless ``NEXUS_PG_POOL`` says otherwise."""

CONNECT_TIMEOUT_S = 10.0
"""How long opening waits for a first connection before it says the server cannot be reached."""

RECONNECT_S = 5.0
"""How long the pool retries a lost connection (backing off 1, 2, 4 s) before it gives that slot up; the next
transaction then asks for a new one at once. psycopg_pool's own 5 minutes doubled the pause between tries up to
two minutes: a database back after an outage went unused for as long again."""

IDLE_IN_TRANSACTION_S = 5.0
"""How long the server lets a transaction of ours sit idle (waiting for our next statement) before it ends the
session and frees its locks (``idle_in_transaction_session_timeout``, SQLSTATE 25P03).

A transaction here runs whole on a worker thread, its statements one after another: it is idle only for the
thread's own work between them (micro- to milliseconds), unless the process stalls (``SIGSTOP``, a frozen VM,
a swap storm). A stalled process kept its row locks for as long as it lived: another broker's acquire skipped
its lease row (``FOR UPDATE SKIP LOCKED``) and never took the session over, or waited on a row it had just
inserted or claimed, and with it that broker's every write (one at a time per process). 5 s is far above any
healthy gap, and a third of the default lease (15 s): a broker held up behind a stalled one is held up that long
at most, well inside its own leases (renewals are retried until the lease would end), and the stalled one's
locks are gone before its lease ends. With a lease shorter than 15 s, a takeover after such a stall comes up to
5 s after the lease's end (a stall between transactions holds no lock and delays nothing)."""

STATEMENT_TIMEOUT_S = 60.0
"""How long the server lets one statement of ours run (``statement_timeout``, SQLSTATE 57014) before it cancels it.

Every statement here is small (a session's rows, a batch of queue items, an index probe, a trim of the events
log): milliseconds on a healthy server, and a wait for a row lock is bounded by the other transaction, itself
short and ended by the idle bound if its process stalled. 60 s is past anything legitimate and equal to the
default ``NEXUS_DB_WAIT_S``, how long a caller waits for the ledger at all: a statement that long belongs to a
server in trouble (an I/O stall, a lock held by hand from ``psql``), and cancelling it frees its locks and its
worker. The transaction is then run again like one whose connection was lost, until the caller's wait is over.
The two jobs that may run longer lift it in their own transactions: a migration (``_migrate``) and a copy of a
whole ledger (``_copy``)."""

MIN_CONNECTION_WAIT_S = 0.1
"""The least one try waits for a connection, so ``NEXUS_DB_WAIT_S=0`` still tries once."""


_BOUNDS = (
    f"SELECT set_config('idle_in_transaction_session_timeout', '{int(IDLE_IN_TRANSACTION_S * 1000)}', true), "
    f"set_config('statement_timeout', '{int(STATEMENT_TIMEOUT_S * 1000)}', true)"
)
"""The transaction's own bounds, sent with its ``BEGIN``: ``set_config(…, true)`` is ``SET LOCAL`` (they end with
the transaction, so pgbouncer's transaction pooling never hands them to another client), both in one statement
(two ``SET LOCAL`` cost psycopg a result each: 8,000 instructions more per transaction, callgrind)."""


def _pool_size() -> int:
    raw = os.environ.get("NEXUS_PG_POOL", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else POOL_SIZE


def _prepare_threshold() -> int | None:
    """psycopg's prepared statements after 5 uses of a statement, or never with ``NEXUS_PG_PREPARE=0``."""
    return None if os.environ.get("NEXUS_PG_PREPARE", "").strip().lower() in ("0", "off", "no", "false") else 5


class PgDatabase:
    """One ledger database on a PostgreSQL server (see the module docstring)."""

    inline = False

    def __init__(self, pool: Any, url: str, size: int) -> None:
        self._pool = pool
        self.url = url
        self.executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="nexus-pg")
        self._write_lane = threading.Lock()
        self._give_up_at = math.inf
        self._in_flight = InFlight()
        self._stop_watch = StopWatch(self._in_flight)
        self.conflicts = 0
        """Transactions the server refused for a conflict (serialization failure, deadlock) and that were run
        again: with one write at a time here, only other processes' writes cause them."""

    @classmethod
    def connect(cls, url: str) -> PgDatabase:
        """Open a pool on ``url`` (blocking: call it off the loop).

        One direct connection is tried first, so a wrong URL, a refused connection or a rejected user is
        said at once in libpq's words (``LedgerUnavailableError``, the password left out).
        """
        from psycopg_pool import ConnectionPool

        _probe(url)
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # our retries say what matters, once
        size = _pool_size()
        kwargs = {"autocommit": True, "prepare_threshold": _prepare_threshold()}
        # No check on checkout (a round trip per transaction): a connection the server closed fails the
        # transaction's first statement, before anything is written, and the transaction is run again.
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs=kwargs,
            open=False,
            name="nexus-ledger",
            reconnect_timeout=RECONNECT_S,
        )
        pool.open(wait=False)
        return cls(pool, url, size)

    @property
    def location(self) -> str:
        """The database's URL without its password."""
        return redacted(self.url)

    def give_up_by(self, seconds: float) -> None:
        """The process is stopping: a transaction that cannot reach the server stops retrying ``seconds`` from
        now (not ``NEXUS_DB_WAIT_S`` after it began), and so does a wait for a pooled connection.

        Without it a broker stopped while PostgreSQL was away kept retrying each aborted run's write, each
        hand-back and each lease release one after another, ``NEXUS_DB_WAIT_S`` (60 s) and a pool wait (30 s)
        apiece: it had not exited 300 s after SIGTERM. What a stop could not write stays as it was (an item
        still ``processing`` is run again by the next broker), so nothing accepted is lost.

        A statement already on the wire is no retry: a silent server (``SIGSTOP``, a proxy that stops forwarding)
        never answers it. Once ``seconds`` have passed, the connections still waiting for an answer are cut
        (``_in_flight``) and listed in :attr:`abandoned`."""
        self._give_up_at = min(self._give_up_at, time.monotonic() + seconds)
        self._stop_watch.start(self._give_up_at)

    @property
    def abandoned(self) -> list[str]:
        """The transactions a stop cut because the server did not answer them by its bound (what and how long)."""
        return list(self._in_flight.abandoned)

    def close(self) -> None:
        """Close the worker threads, then every connection.

        In this order, and with the retries given up first: a transaction still on a worker (a look at the
        queue cancelled on the loop goes on here) ends on the open pool, it never meets a closed one. Closed
        first, every attempt of that look failed with "the pool is already closed", taken for a lost
        connection and retried for ``NEXUS_DB_WAIT_S``: a stopped broker exited a minute late (the fault bench).
        A transaction still on the wire gets ``LATE_ATTEMPT_S`` more (or what is left of a stop's bound), then its
        connection is cut: a silent server held the close forever.
        """
        self._give_up_at = time.monotonic()
        self._stop_watch.start(self._give_up_at + LATE_ATTEMPT_S)
        self.executor.shutdown(wait=True)
        self._stop_watch.stop()
        # a worker of the pool may be connecting to a silent server: the pool's own wait for it is 5 s
        self._pool.close(timeout=0.5 if self._in_flight.abandoned else 5.0)

    # ------------------------------------------------------------------ transactions (on a worker thread)

    def read(self, fn: Callable[[Any], T], *, wait_s: float | None = None) -> T:
        """Run ``fn(conn)`` in one read-only snapshot (``REPEATABLE READ``); ``wait_s`` as for :meth:`write`."""
        return self._transaction(fn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", wait_s)

    def write(
        self, fn: Callable[[Any], T], *, wait_s: float | None = None, serializable: bool = True, row_locks: bool = False
    ) -> T:
        """Run ``fn(conn)`` in one ``SERIALIZABLE`` transaction, retried whole on a conflict or a lost connection.

        One write transaction at a time per process (reads go on beside it): concurrent writes of one process
        conflicted with each other under ``SERIALIZABLE`` even on different sessions (new turns all land on the
        last page of an index another turn's write has read: PostgreSQL's predicate locks are per page), and
        each conflict cost a retry: 813 retried turn writes per 500 turns in one broker, 52 -> 87 turns/s
        without them (``bench/bench_scale_out.py``). The queue's writes are grouped (``_queue_store``).

        ``serializable=False``: ``READ COMMITTED``, each statement seeing what committed before it (a
        migration, which must see the tables another process made while it waited for the lock).

        ``row_locks=True``: ``fn`` locks every row its outcome depends on before it reads it (``FOR UPDATE``
        / ``FOR SHARE``), so ``READ COMMITTED`` is enough: it takes no predicate locks, so writes of other
        processes to other sessions never refuse it for a page both touched. It still runs in the lane:
        beside it, a process's turn writes met its own serializable queue writes (3 brokers: 97-151
        turns/s and 53-113 writes refused per 1,000 turns, against 175-222 and 22-31 in the lane).
        """
        level = "SERIALIZABLE" if serializable and not row_locks else "READ COMMITTED"
        wait = wait_bound() if wait_s is None else wait_s
        deadline = time.monotonic() + wait
        if not self._write_lane.acquire(timeout=max(wait, MIN_CONNECTION_WAIT_S)):  # the wait counts from here
            raise LedgerBusyError(
                f"the ledger database {self.location} is busy: another write of this process held it for {wait:g} s"
                f"{_wait_hint(wait) if wait_s is None else ''}"
            )
        try:
            return self._transaction(fn, f"BEGIN ISOLATION LEVEL {level}", wait_s, deadline)
        finally:
            self._write_lane.release()

    def _transaction(self, fn: Callable[[Any], T], begin: str, wait_s: float | None, deadline: float = 0.0) -> T:
        """Run ``fn`` until it commits or ``deadline`` (default: ``wait_s`` or ``NEXUS_DB_WAIT_S`` from now)."""
        import psycopg

        wait = wait_bound() if wait_s is None else wait_s
        deadline = min(deadline or time.monotonic() + wait, self._give_up_at)  # a stop's, once it gave one
        delay = 0.002
        while True:
            try:
                return self._attempt(fn, begin, deadline)
            except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as exc:
                self.conflicts += 1
                if time.monotonic() >= deadline:  # another transaction won each time: run this one again
                    raise LedgerBusyError(
                        f"the ledger database {self.location} kept refusing a write for conflicts ({exc}); "
                        "wait longer with NEXUS_DB_WAIT_S=SECONDS"
                    ) from exc
            except (psycopg.OperationalError, psycopg.errors.IdleInTransactionSessionTimeout) as exc:  # 57014 too
                if not _connection_lost(exc):
                    raise LedgerRefusedError(f"the ledger database {self.location} refused a statement: {exc}") from exc
                if time.monotonic() >= min(deadline, self._give_up_at):  # the process may have begun stopping
                    raise self._given_up(exc, wait, wait_s, stopping=self._give_up_at <= deadline) from exc
                log.warning("ledger database connection lost (%s); retrying", exc)
            except psycopg.Error as exc:  # a statement the server refused: the database is not what we expect
                raise LedgerRefusedError(f"the ledger database {self.location} refused a statement: {exc}") from exc
            time.sleep(min(delay * (1 + random.random()), max(0.0, min(deadline, self._give_up_at) - time.monotonic())))
            delay = min(delay * 2, 0.5)

    def _given_up(self, exc: Exception, wait: float, wait_s: float | None, *, stopping: bool) -> LedgerUnavailableError:
        """Why a transaction stopped retrying: the process's stop, statements the server kept cancelling
        (``STATEMENT_TIMEOUT_S``), or a server that stayed unreachable for the wait."""
        where = f"the ledger database {self.location}"
        if stopping:
            return LedgerUnavailableError(f"{where} did not answer before the process's stop gave up on it ({exc})")
        hint = _wait_hint(wait) if wait_s is None else ""
        if getattr(exc, "sqlstate", None) == "57014":
            return LedgerUnavailableError(
                f"{where} kept running statements past their {STATEMENT_TIMEOUT_S:g} s bound for {wait:g} s ({exc}); "
                f"the server is overloaded or a lock is held by hand{hint}"
            )
        return LedgerUnavailableError(
            f"{where} stayed unreachable for {wait:g} s ({exc}); check that PostgreSQL runs{hint}"
        )

    def _attempt(self, fn: Callable[[Any], T], begin: str, deadline: float) -> T:
        """One try; a connection is waited for until ``deadline`` only (the pool's own 30 s would be a floor
        under ``NEXUS_DB_WAIT_S``), and a wait that ran out is a lost connection to the caller."""
        from psycopg_pool import PoolClosed, PoolTimeout

        try:
            until = min(deadline, self._give_up_at)  # a stop that began meanwhile shortens the wait
            with self._pool.connection(timeout=max(until - time.monotonic(), MIN_CONNECTION_WAIT_S)) as raw:
                on_wire = self._in_flight.enter(raw, fn, begin)  # a stop past its bound may cut it (_in_flight)
                try:
                    raw.execute(f"{begin}; {_BOUNDS}")
                    try:
                        result = fn(PgConnection(raw))
                    except BaseException:
                        _roll_back(raw)
                        raise
                    raw.execute("COMMIT")
                    return result
                finally:
                    self._in_flight.leave(on_wire)
        except PoolClosed as exc:  # the ledger was closed: nothing to wait for
            raise LedgerUnavailableError(f"the ledger database {self.location} is closed") from exc
        except PoolTimeout as exc:
            import psycopg

            raise psycopg.OperationalError("no connection could be opened") from exc

    # ------------------------------------------------------------------ for the event loop

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call()`` on a worker thread; the event loop goes on meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, call)

    async def run_read(self, fn: Callable[[Any], T]) -> T:
        """:meth:`read` on a worker thread."""
        return await self.run(lambda: self.read(fn))

    async def run_write(self, fn: Callable[[Any], T], *, wait_s: float | None = None, row_locks: bool = False) -> T:
        """:meth:`write` on a worker thread."""
        return await self.run(lambda: self.write(fn, wait_s=wait_s, row_locks=row_locks))


def _wait_hint(wait: float) -> str:
    """How to change a wait that came from ``NEXUS_DB_WAIT_S`` (a caller's own bound has no variable to name)."""
    return f", or set how long to wait with NEXUS_DB_WAIT_S=SECONDS (now {wait:g})"


def _roll_back(raw: Any) -> None:
    """End a failed transaction; a connection that broke meanwhile is left to the pool to replace."""
    import psycopg

    if raw.closed or raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    try:
        raw.execute("ROLLBACK")
    except psycopg.Error:
        log.debug("rollback failed", exc_info=True)


def _connection_lost(exc: Exception) -> bool:
    """A broken or closed connection, a server shutting down or not reachable (class 08, 57P0x), a session
    the server ended because the process stalled inside a transaction (25P03), or a statement it cancelled past
    ``STATEMENT_TIMEOUT_S`` (57014): nothing committed, worth a retry."""
    state = getattr(exc, "sqlstate", None) or ""
    return not state or state.startswith("08") or state in ("57P01", "57P02", "57P03", "25P03", "57014")


def _probe(url: str) -> None:
    """Connect once; ``LedgerUnavailableError`` naming why not (the first line of libpq's reason).

    A server with no connection slot free (``max_connections`` reached: 53300, or 57P03 while it starts) is
    asked again until ``NEXUS_DB_WAIT_S`` has passed: every nexus process holds connections of its own, and a
    hundred ``nexus send`` at once found the slots taken and failed at once, told to check a URL that was right.
    Past the wait it is a :class:`LedgerBusyError` (exit 1: try again later), not a setup error."""
    import psycopg

    wait = wait_bound()
    deadline, pause = time.monotonic() + wait, 0.05
    while True:
        try:
            psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S)).close()
            return
        except (psycopg.Error, ValueError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            reason = scrubbed(reason, url)  # libpq quotes a URL it cannot parse, password and all
            if not any(words in reason for words in _NO_SLOT):  # not a server short of slots: said at once
                raise LedgerUnavailableError(
                    f"cannot connect to the ledger database {redacted(url)} ({reason}); check the URL, that "
                    "PostgreSQL runs there and accepts this user"
                ) from None
            if time.monotonic() + pause > deadline:
                raise LedgerBusyError(
                    f"the ledger database {redacted(url)} had no connection free ({reason}); each nexus process "
                    "holds connections of its own (a server up to NEXUS_PG_POOL, a command one or two): raise the "
                    f"server's max_connections or put pgbouncer in front{_wait_hint(wait)}"
                ) from None
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, 1.0)


_NO_SLOT = ("too many connections", "remaining connection slots are reserved", "the database system is starting up")
"""libpq's words for SQLSTATE 53300 (``max_connections`` reached, or a role's or database's ``CONNECTION LIMIT``)
and 57P03 while the server starts: a refused connection carries no SQLSTATE, only the server's message (in
English unless the server's ``lc_messages`` says otherwise: then it is said at once, as before)."""
