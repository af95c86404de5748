"""WAL checkpoints on a thread of their own, for long-running processes (``nexus serve``, drains).

In WAL mode a commit appends pages to ``agents.db-wal``; every 1,000 pages the commit that
crosses the mark copies them back into the database file and fsyncs it (a checkpoint), which
took ~13 ms on the 2-core benchmark VM. That commit runs on the event loop: each checkpoint
stalled every HTTP request and run of the process for its duration, several times a second
under load. :class:`WalCheckpointer` runs ``PRAGMA wal_checkpoint(PASSIVE)`` from its own
connection on a thread instead (SQLite releases the GIL while it copies and syncs), and
raises the loop's own threshold to a backstop that only matters if the thread falls behind.

Durability is unchanged: a commit is in the WAL before ``COMMIT`` returns, whoever checkpoints
it later, so it survives a killed process; a PASSIVE checkpoint never blocks a writer. The WAL
is fsynced at each checkpoint, so with ``synchronous=NORMAL`` a power loss can lose at most the
commits since the last one — now about :data:`INTERVAL_S` while writes come in, instead of up
to 1,000 pages' worth.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator

from nexus.ledger._sqlite import Database

log = logging.getLogger("nexus.ledger")

INTERVAL_S = 0.1
"""How often the thread checkpoints what the WAL gained (a no-op when nothing was written)."""

BACKSTOP_PAGES = 10_000
"""The loop's own checkpoint threshold while the thread runs (~40 MB of WAL): only if it falls behind."""

DEFAULT_PAGES = 1000
"""SQLite's default threshold, restored when the thread stops."""


class WalCheckpointer:
    """Checkpoints one database's WAL every :data:`INTERVAL_S` on a daemon thread (see the module doc)."""

    def __init__(self, db: Database, *, interval_s: float = INTERVAL_S) -> None:
        self._db = db
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checkpoints = 0
        """Checkpoints that copied new pages (for tests and benchmarks)."""
        self._last: tuple[int, int] = (0, 0)

    def start(self) -> None:
        """Open the thread's connection and start it (nothing to do for an in-memory database)."""
        if self._db.path == ":memory:" or self._thread is not None:
            return
        conn = sqlite3.connect(self._db.path, isolation_level=None, check_same_thread=False, timeout=0)
        self._db.set_wal_autocheckpoint(BACKSTOP_PAGES)
        self._thread = threading.Thread(target=self._run, args=(conn,), name="nexus-wal-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (after its current checkpoint) and give the loop its own checkpoints back."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        with contextlib.suppress(Exception):  # the database may be closed already: nothing to restore
            self._db.set_wal_autocheckpoint(DEFAULT_PAGES)

    def _run(self, conn: sqlite3.Connection) -> None:
        try:
            while not self._stop.wait(self._interval_s):
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, wal_pages, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # e.g. a full disk: the loop's backstop still checkpoints
            log.debug("background WAL checkpoint failed: %s", exc)
            return
        if copied > 0 and not busy and (wal_pages, copied) != self._last:
            self.checkpoints += 1
        self._last = (wal_pages, copied)


@contextlib.contextmanager
def background_checkpoints(db: Database) -> Iterator[WalCheckpointer]:
    """A :class:`WalCheckpointer` running for the block."""
    checkpointer = WalCheckpointer(db)
    checkpointer.start()
    try:
        yield checkpointer
    finally:
        checkpointer.stop()
