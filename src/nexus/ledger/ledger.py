"""``Ledger``: the Agents Ledger, a composition of its stores (sessions as pointers into a tree of turns).

``ledger.turns`` (open, journal, write, recover; histories and windows), ``ledger.sessions`` (pointers,
forks, aliases, the pointer log), ``ledger.queue`` (the broker's durable queue), ``ledger.agents`` (the
registry), ``ledger.deliveries`` (where replies went), ``ledger.leases`` (one run per session across
processes) and ``ledger.pi`` (pi session files): each an
async store of :mod:`nexus.ledger.protocols`, all on one database. SQLite (a file, the embedded default)
is opened with :meth:`Ledger.open`; :meth:`Ledger.connect` opens a file or a database URL.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from nexus.ledger._session_store import SqlSessionStore
from nexus.ledger._sql_db import OnCallingThread, SqlDatabase, run_inline
from nexus.ledger._sqlite import Database
from nexus.ledger._turn_store import SqlTurnStore
from nexus.ledger.errors import LedgerUnavailableError

if TYPE_CHECKING:
    from nexus.ledger._lease_store import SqlLeaseStore
    from nexus.ledger._queue_store import SqlQueueStore
    from nexus.ledger._small_stores import SqlAgentStore, SqlDeliveryStore, SqlPiFiles
    from nexus.ledger.postgres._run_events import RunEventLog
    from nexus.ledger.protocols import QueueListener

T = TypeVar("T")


def default_db_path() -> Path:
    """``$NEXUS_HOME/agents.db`` (``NEXUS_HOME`` defaults to ``~/.nexus``): where the ledger lives."""
    home = os.environ.get("NEXUS_HOME") or str(Path.home() / ".nexus")
    return Path(home).expanduser() / "agents.db"


STOP_WAIT_S = 10.0
"""How long a stopping process keeps trying to reach PostgreSQL (:meth:`Ledger.stopping`)."""

DEFAULT_MESSAGE_CACHE = 50_000
"""Messages a :class:`Ledger` keeps decoded by default (about 0.7 KB each): a long-lived process
(broker, chat) then pays only for the new turn on each ``history()`` call."""


class Ledger:
    """The Agents Ledger: its stores, on one database.

    Invariants (docs/ledger.md lists the test proving each): a turn is written whole or not
    at all; nothing is deleted; a session moves only to a finished turn and every move is
    logged; a write whose parent is no longer the session head raises
    :class:`~nexus.ledger.errors.HeadMovedError` instead of forking silently.
    """

    turns: SqlTurnStore
    sessions: SqlSessionStore

    def __init__(self, db: SqlDatabase, *, message_cache: int = DEFAULT_MESSAGE_CACHE) -> None:
        self._db = db
        self.turns = SqlTurnStore(db, message_cache=message_cache)
        self.sessions = SqlSessionStore(db)
        self._here: Ledger | None = None
        self._checking: asyncio.Future[Any] | None = None

    # The broker's stores and pi's files, made (and their modules imported) on first use: a one-shot
    # ``nexus run`` touches none of them.

    @functools.cached_property
    def queue(self) -> SqlQueueStore:
        """The broker's durable queue."""
        from nexus.ledger._queue_store import SqlQueueStore

        return SqlQueueStore(self._db)

    @functools.cached_property
    def agents(self) -> SqlAgentStore:
        """The agent registry."""
        from nexus.ledger._small_stores import SqlAgentStore

        return SqlAgentStore(self._db)

    @functools.cached_property
    def deliveries(self) -> SqlDeliveryStore:
        """Where replies went."""
        from nexus.ledger._small_stores import SqlDeliveryStore

        return SqlDeliveryStore(self._db)

    @functools.cached_property
    def leases(self) -> SqlLeaseStore:
        """One run per session across processes."""
        from nexus.ledger._lease_store import SqlLeaseStore

        return SqlLeaseStore(self._db)

    @functools.cached_property
    def pi(self) -> SqlPiFiles:
        """pi session files, imported and exported."""
        from nexus.ledger._small_stores import SqlPiFiles

        return SqlPiFiles(self)

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, synchronous: str = "NORMAL", message_cache: int = DEFAULT_MESSAGE_CACHE
    ) -> Ledger:
        """Open (creating and migrating if needed) the SQLite ledger at ``path`` (default: :func:`default_db_path`).

        ``":memory:"`` gives a private in-memory ledger for tests. ``synchronous="FULL"`` makes every
        commit survive power loss too, at the cost of one fsync per turn. ``message_cache=N`` (default
        :data:`DEFAULT_MESSAGE_CACHE`; 0 turns it off) keeps up to N decoded messages, so repeated
        histories only read and decode new turns. Each call returns a new list, but the message objects
        in it are shared between calls: treat them as read-only (``dataclasses.replace`` one first).
        """
        if isinstance(path, str) and ":" in path:  # else a URL became a file under a directory "postgresql:"
            from nexus.ledger.postgres import is_postgres_url, location_problem, redacted

            if is_postgres_url(path):
                raise ValueError(
                    f"Ledger.open opens an SQLite file, and {redacted(path)} is a database URL:"
                    " use `await Ledger.connect(url)` for PostgreSQL"
                )
            problem = location_problem(path)
            if problem is not None:
                raise ValueError(problem)
        db = Database(default_db_path() if path is None else path, synchronous=synchronous)
        return cls(db, message_cache=message_cache)

    @classmethod
    def open_file_only(cls, path: str | Path) -> Ledger:
        """Open the SQLite ledger at ``path`` read-only from its database file alone, for reading on a full disk.

        SQLite needs room beside the file (``agents.db-shm``) even to read a ledger the usual way; this way
        needs none, but it does not see what is still only in the write-ahead log (``agents.db-wal``): the
        last writes before the disk filled, until a checkpoint copies them into the file. Every write raises
        :class:`LedgerFullError`; a file of another schema version is refused (it cannot be migrated here).
        """
        return cls(Database(path, file_only=True), message_cache=0)

    @classmethod
    async def connect(
        cls,
        target: str | Path | None = None,
        *,
        migrate: bool = True,
        synchronous: str = "NORMAL",
        message_cache: int = DEFAULT_MESSAGE_CACHE,
    ) -> Ledger:
        """Open the ledger at ``target``: a ``postgresql://`` URL, or an SQLite file as :meth:`open` does.

        A PostgreSQL database is brought to the current schema (``migrate=False``: refused if behind); one of a
        schema this code does not know is refused (``SchemaVersionError``); a server that cannot be reached
        is ``LedgerUnavailableError``. Connecting runs on a worker thread: the event loop never waits for it.
        """
        if isinstance(target, str) and "://" in target:  # a path (an SQLite file) leaves the PostgreSQL code unloaded
            from nexus.ledger.postgres import is_postgres_url, open_database

            if is_postgres_url(target):
                url = target
                db = await asyncio.to_thread(lambda: open_database(url, migrate=migrate))
                return cls(db, message_cache=message_cache)
        return cls.open(target, synchronous=synchronous, message_cache=message_cache)

    def stopping(self, within_s: float = STOP_WAIT_S) -> None:
        """The process is stopping: on PostgreSQL, writes and reads that cannot reach the server give up within
        ``within_s`` from now instead of retrying for ``NEXUS_DB_WAIT_S`` each, and those a silent server has not
        answered by then are cut (:attr:`abandoned`), so the stop is bounded (what could not be written stays as
        it was: a message still ``processing`` runs again on the next start).
        Nothing changes on SQLite (a local file)."""
        give_up_by = getattr(self._db, "give_up_by", None)
        if give_up_by is not None:
            give_up_by(within_s)

    @property
    def abandoned(self) -> list[str]:
        """What a stop gave up waiting for: the transactions a silent PostgreSQL had not answered by the bound of
        :meth:`stopping` (their connections were cut; nothing of them committed). Empty on SQLite."""
        return list(getattr(self._db, "abandoned", ()))

    async def aclose(self) -> None:
        """Close the database (its connections, for a server) without holding the event loop."""
        if self._db.inline:
            self.close()
        else:
            await asyncio.to_thread(self.close)

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def wakeups(self) -> QueueListener | None:
        """Queue wake-ups from other processes: PostgreSQL's LISTEN on a connection of its own (``None`` on
        SQLite, or with ``NEXUS_PG_LISTEN=0``: brokers then poll only; see docs/scaling.md)."""
        if self._db.inline:
            return None
        from nexus.ledger.postgres._listen import QueueListener as PgListener
        from nexus.ledger.postgres._listen import listening_enabled

        url = getattr(self._db, "url", None)
        return PgListener(url) if isinstance(url, str) and listening_enabled() else None

    @property
    def run_events(self) -> RunEventLog | None:
        """The ``run_events`` log every process's runs publish their StreamEvents into (PostgreSQL; ``None`` on
        SQLite, where one server holds the file and its in-memory event hub is the whole story)."""
        if self._db.inline:
            return None
        from nexus.ledger.postgres._run_events import RunEventLog as PgRunEventLog

        return PgRunEventLog(self._db)  # type: ignore[arg-type]

    @property
    def path(self) -> str:
        """Where the ledger is: the database file (or ``:memory:``), or a server's URL without its password."""
        return self._db.location

    @property
    def inline(self) -> bool:
        """True when every store call answers without suspending (SQLite): it may then run on the event loop
        inline; False for a database reached over the network (PostgreSQL), whose calls wait off the loop."""
        return self._db.inline

    def others_mark(self) -> int | None:
        """A number that changes whenever another connection (another process) commits to this ledger, and
        stays the same for this ledger's own commits (SQLite's ``data_version``); ``None`` where the database
        cannot tell (PostgreSQL, or SQLite while another thread's write holds the connection: asking would
        wait for it). A process remembers what it found with it, to skip reading it again."""
        version = getattr(self._db, "data_version", None)
        mark = version() if version is not None else None
        return int(mark) if mark is not None else None

    def run_here(self, call: Callable[[Ledger], Coroutine[Any, Any, T]]) -> T:
        """Run ``call(ledger)`` (store calls) to its end on this thread, for code that cannot await.

        The engine's ledger writer thread uses it. On SQLite the stores answer inline anyway; on PostgreSQL
        ``call`` gets this ledger with every transaction run on the calling thread, which then waits for
        the server: call it only off the event loop there (or where a short wait on it is the lesser evil).
        """
        if self._db.inline:
            return run_inline(call(self))
        if self._here is None:
            self._here = Ledger(OnCallingThread(self._db), message_cache=0)
        return run_inline(call(self._here))

    async def off_loop(self, call: Callable[[Ledger], Coroutine[Any, Any, T]]) -> T:
        """Await ``call(ledger)`` (store calls) without holding the event loop while it reads much.

        On SQLite the stores answer inline, so a long history or a whole tree would hold the loop: ``call``
        runs on a worker thread instead (the file is safe to share between threads). On PostgreSQL the
        stores already wait off the loop, and ``call`` is simply awaited. For a server's big reads and imports.
        """
        if self._db.inline:
            return await asyncio.to_thread(run_inline, call(self))
        return await call(self)

    async def check(self, wait_s: float) -> None:
        """Raise ``LedgerUnavailableError`` unless the database answers a trivial read within about ``wait_s``.

        For a liveness probe (``GET /v1/health``): a store call waits ``NEXUS_DB_WAIT_S`` (60 s) for a lost
        database, far past any probe's timeout. On PostgreSQL the read runs on a thread of its own (the pool's
        workers may all be waiting out the lost server), and checks made meanwhile share it: probes of a
        server that hangs hold one thread, not one each.
        """
        if self._db.inline:
            await self._db.run_read(_answer)
            return
        loop = asyncio.get_running_loop()
        pending = self._checking
        if pending is None or pending.done() or pending.get_loop() is not loop:
            read = cast(Any, self._db).read
            pending = self._checking = loop.run_in_executor(None, lambda: read(_answer, wait_s=wait_s))
            pending.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved, even if late
        try:
            await asyncio.wait_for(asyncio.shield(pending), wait_s + 1.0)
        except TimeoutError:
            raise LedgerUnavailableError(
                f"the ledger database {self.path} did not answer within {wait_s:g} s; check that it runs"
            ) from None

    def write_problem(self) -> str | None:
        """Why a write cannot succeed now, as a sentence, or ``None``: an SQLite ledger whose disk a write found
        full and that is still (almost) full, or one open read-only from its file alone. For health checks,
        which only read: a full disk leaves reads working while every write fails, and a probe that answered
        a bare "ok" then hid it. ``None`` for PostgreSQL (its server's disk is not ours to see; a failed write
        says so itself)."""
        if getattr(self._db, "file_only", False):
            return f"the ledger {self.path} is open read-only from its database file alone"
        if not getattr(self._db, "full_seen", False):
            return None
        from nexus.ledger._disk import full_disk

        problem = full_disk(Path(self.path))
        if problem is None:  # room again: the next check need not look at the disk
            self._db.full_seen = False  # type: ignore[attr-defined]
        return problem

    @property
    def database(self) -> Database:
        """The underlying database (for tools and tests)."""
        return self._db  # type: ignore[return-value]

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()  # type: ignore[attr-defined]

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _answer(conn: Any) -> object:
    """A statement every database answers at once (``SELECT 1``)."""
    return conn.execute("SELECT 1").fetchone()
