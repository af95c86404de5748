"""The SQLite connection: pragmas, short write transactions with a bounded busy retry, snapshot reads.

Concurrency model: any number of processes may open the same file. Writers take the
write lock up front (``BEGIN IMMEDIATE``) so a transaction never has to upgrade a read lock
(which SQLite refuses with an immediate SQLITE_BUSY in WAL mode); ``busy_timeout`` makes
SQLite wait for the lock, and a bounded retry around the whole transaction covers the rare
busy errors the busy handler does not (snapshot conflicts, WAL recovery). Only when the
budget is spent does the caller see :class:`LedgerBusyError` - never "database is locked".
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from nexus.ledger._schema import migrate
from nexus.ledger.errors import LedgerBusyError, LedgerError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5_000
RETRY_ATTEMPTS = 8


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Database:
    """One connection to ``agents.db`` guarded by a lock (safe to share between threads).

    All calls are short (one transaction of a few statements); an asyncio caller can run
    the big ones (history of a very long session, imports) in ``asyncio.to_thread``.
    """

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the ledger {self.path} ({exc}); give the path of a database file") from exc
        self._conn = conn
        try:
            self.found_version = self._setup(conn, synchronous)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError | LedgerError):
                raise LedgerError(
                    f"{self.path} is not a usable ledger database ({exc}); move it aside and open again to start a "
                    "new one, or point NEXUS_HOME elsewhere"
                ) from exc
            if isinstance(exc, sqlite3.OperationalError) and not _is_busy(exc):
                raise LedgerError(
                    f"cannot open the ledger {self.path} ({exc}); check the path and its permissions"
                ) from exc
            raise

    def _setup(self, conn: sqlite3.Connection, synchronous: str) -> int:
        """Pragmas and migrations of a new connection; returns the schema version the file had."""
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        # NORMAL in WAL mode: a committed transaction survives a process crash (the WAL is
        # written before COMMIT returns); only an OS crash/power loss can lose the last commits.
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -16000")
        return self._retry(lambda: migrate(conn))

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection (for tests and the conformance suite; hold no transaction open on it)."""
        return self._conn

    def close(self) -> None:
        """Close the connection; further calls fail."""
        with self._lock:
            self._conn.close()

    def _retry(self, fn: Callable[[], T]) -> T:
        delay = 0.002
        for attempt in range(RETRY_ATTEMPTS):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == RETRY_ATTEMPTS - 1:
                    if _is_busy(exc):
                        raise LedgerBusyError(
                            f"{self.path} stayed locked by other writers for more than {RETRY_ATTEMPTS} attempts "
                            f"of {BUSY_TIMEOUT_MS} ms; is a process stuck inside a transaction?"
                        ) from exc
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.2)
        raise AssertionError("unreachable")

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction; retried whole on a busy database.

        ``fn`` must only touch the database (it may run more than once); any exception it
        raises rolls everything back.
        """

        def attempt() -> T:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        with self._lock:
            return self._retry(attempt)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one read transaction, so multi-statement reads see one snapshot."""

        def attempt() -> T:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

        with self._lock:
            return self._retry(attempt)
