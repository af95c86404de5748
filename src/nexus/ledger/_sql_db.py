"""What the SQL stores need of a database: one transaction per call, run for the event loop.

The stores (``_turn_store``, ``_session_store``, ``_queue_store``, ``_small_stores``) hold the ledger's
logic once, as functions of one connection inside one transaction (``fn(conn)``). A backend gives them
a :class:`SqlDatabase`: SQLite runs ``fn`` inline (short, never waiting on a network); PostgreSQL runs it
on a worker thread with a pooled connection, so a slow or lost connection never holds the event loop.
``fn`` may run more than once (a busy or conflicting transaction is retried whole), so it must only
touch the database.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, cast

T = TypeVar("T")


class SqlDatabase(Protocol):
    """One ledger database of the SQL backends (``nexus.ledger._sqlite.Database``, the PostgreSQL one)."""

    inline: bool
    """True when every call finishes without suspending (SQLite): a caller may then drive one with
    :func:`run_inline` where it cannot await (a loop callback)."""

    @property
    def location(self) -> str:
        """Where the ledger is, for messages and rescue file names (a path, or a URL without its password)."""
        ...

    def read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(conn)`` in one read transaction, on this thread (a worker's, for a networked database)."""
        ...

    def write(self, fn: Callable[[Any], T], *, wait_s: float | None = None, row_locks: bool = False) -> T:
        """Run ``fn(conn)`` in one write transaction, on this thread (see :meth:`read`).

        ``row_locks``: ``fn`` locks the rows it depends on (:func:`nexus.ledger._write.for_update`), so a
        database with concurrent writers may run it at a weaker isolation (PostgreSQL: ``READ COMMITTED``);
        SQLite, one writer at a time, runs every write alike."""
        ...

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call()`` (which uses :meth:`read`/:meth:`write`) where this database's work runs."""
        ...

    async def run_read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(conn)`` in one read transaction (one snapshot)."""
        ...

    async def run_write(self, fn: Callable[[Any], T], *, wait_s: float | None = None, row_locks: bool = False) -> T:
        """Run ``fn(conn)`` in one write transaction; ``wait_s`` bounds the wait for a busy database."""
        ...


class OnCallingThread:
    """A database whose transactions run on the thread that asks, each call finishing without suspending.

    For code already off the event loop that cannot await (the engine's ledger writer thread): the stores
    built on it are ``inline`` whatever the backend, and a PostgreSQL transaction then waits on that thread
    (never use it on the event loop of a networked database).
    """

    inline = True

    def __init__(self, db: SqlDatabase) -> None:
        self._db = db

    @property
    def location(self) -> str:
        """Where the ledger is (the wrapped database's location)."""
        return self._db.location

    def read(self, fn: Callable[[Any], T]) -> T:
        """The wrapped database's read transaction, on this thread."""
        return self._db.read(fn)

    def write(self, fn: Callable[[Any], T], *, wait_s: float | None = None, row_locks: bool = False) -> T:
        """The wrapped database's write transaction, on this thread."""
        return self._db.write(fn, wait_s=wait_s, row_locks=row_locks)

    async def run(self, call: Callable[[], T]) -> T:
        """``call()`` here and now."""
        return call()

    async def run_read(self, fn: Callable[[Any], T]) -> T:
        """:meth:`read` here and now."""
        return self._db.read(fn)

    async def run_write(self, fn: Callable[[Any], T], *, wait_s: float | None = None, row_locks: bool = False) -> T:
        """:meth:`write` here and now."""
        return self._db.write(fn, wait_s=wait_s, row_locks=row_locks)


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (an SQLite store call) to its end, here and now.

    The SQLite backend's calls are short and never wait on anything but SQLite itself, so they finish
    without giving the event loop back; this drives one from code that is not a coroutine (the
    broker's group commit callback, ``Ledger.run_here``). A coroutine that does suspend
    is a bug: it is closed and reported.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("a ledger call waited on something, where only an inline (SQLite) call is allowed")
