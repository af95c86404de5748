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

    def write(self, fn: Callable[[Any], T], *, wait_s: float | None = None) -> T:
        """Run ``fn(conn)`` in one write transaction, on this thread (see :meth:`read`)."""
        ...

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call()`` (which uses :meth:`read`/:meth:`write`) where this database's work runs."""
        ...

    async def run_read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(conn)`` in one read transaction (one snapshot)."""
        ...

    async def run_write(self, fn: Callable[[Any], T], *, wait_s: float | None = None) -> T:
        """Run ``fn(conn)`` in one write transaction; ``wait_s`` bounds the wait for a busy database."""
        ...


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (an SQLite store call) to its end, here and now.

    The SQLite backend's calls are short and never wait on anything but SQLite itself, so they finish
    without giving the event loop back; this drives one from code that is not a coroutine (the
    broker's group commit callback, the synchronous ``Ledger`` methods). A coroutine that does suspend
    is a bug: it is closed and reported.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("a ledger call waited on something, where only an inline (SQLite) call is allowed")
