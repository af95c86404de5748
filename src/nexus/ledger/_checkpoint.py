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

**Starting the WAL over.** SQLite reuses the WAL from its beginning only when a write
transaction starts while every frame in it has been copied back. Under a steady stream of
commits that never happens by itself: each checkpoint copies what the WAL held when it began,
and the loop commits more while it syncs. The WAL then only grows — new blocks for the file
system to allocate, whose write-back the loop's next appends wait for — until the backstop
makes a commit on the loop checkpoint it all (10-14 ms on the benchmark VM, every ~0.4 s at
10,000 queue messages a second). So when the WAL holds :data:`RESTART_PAGES` or more, the
thread checkpoints once more (copying what came in meanwhile) and asks the loop to finish
(:meth:`Database.checkpoint` between two of its transactions, ~2 ms for the few frames left);
nothing can commit in between, so the loop's next commit starts the WAL over. A process with
no event loop keeps the backstop alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator

from nexus.ledger._sqlite import Database, passive_checkpoint

INTERVAL_S = 0.1
"""How often the thread checkpoints what the WAL gained (a no-op when nothing was written)."""

BACKSTOP_PAGES = 10_000
"""The writer's own checkpoint threshold while the thread runs (~40 MB of WAL): only reached when no
loop finishes checkpoints (a thread started outside one) or the loop never gets to it."""

DEFAULT_PAGES = 1000
"""SQLite's default threshold, restored when the thread stops."""

RESTART_PAGES = 3000
"""WAL frames (~12 MB) from which the loop is asked to finish a checkpoint so the WAL starts over.

Lower means more frequent ~2 ms pauses of the loop, higher a bigger WAL to sync and reread."""


class WalCheckpointer:
    """Checkpoints one database's WAL every :data:`INTERVAL_S` on a daemon thread (see the module doc)."""

    def __init__(
        self,
        db: Database,
        *,
        interval_s: float = INTERVAL_S,
        restart_pages: int = RESTART_PAGES,
        backstop_pages: int = BACKSTOP_PAGES,
    ) -> None:
        self._db = db
        self._interval_s = interval_s
        self._restart_pages = restart_pages
        self._backstop_pages = backstop_pages
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._asked = threading.Event()
        """Set while the loop has a finishing checkpoint to run (one request at a time)."""
        self.checkpoints = 0
        """Checkpoints that copied new pages (for tests and benchmarks)."""
        self.restarts_asked = 0
        """Finishing checkpoints the loop ran so the WAL could start over (for tests and benchmarks)."""
        self._last: tuple[int, int] = (0, 0)

    def start(self) -> None:
        """Open the thread's connection and start it (nothing to do for an in-memory database).

        Started from a running event loop (``nexus serve``, the drains), the loop is the one
        asked to finish checkpoints so the WAL starts over (see the module doc).
        """
        if self._db.path == ":memory:" or self._thread is not None:
            return
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        conn = sqlite3.connect(self._db.path, isolation_level=None, check_same_thread=False, timeout=0)
        self._db.set_wal_autocheckpoint(self._backstop_pages)
        self._stop.clear()  # started again after stop(): the new thread ran into the old stop and ended at
        self._asked.clear()  # once, leaving the writer's checkpoints at the backstop with nobody doing them
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
        wal_pages, copied = passive_checkpoint(conn)
        if wal_pages < 0:  # e.g. a full disk: the writer's backstop still checkpoints
            return
        if copied > 0 and (wal_pages, copied) != self._last:  # busy: it copied what it could
            self.checkpoints += 1
        self._last = (wal_pages, copied)
        if wal_pages >= self._restart_pages and self._loop is not None and not self._asked.is_set():
            self._ask_loop_to_finish(conn)

    def _ask_loop_to_finish(self, conn: sqlite3.Connection) -> None:
        """Copy what came in during the checkpoint, then have the loop copy the rest and start the WAL over."""
        passive_checkpoint(conn)  # if it fails, the loop's own checkpoint copies what this one did not
        assert self._loop is not None
        self._asked.set()
        try:
            self._loop.call_soon_threadsafe(self._finish_on_loop)
        except RuntimeError:  # the loop closed: the backstop is all that is left
            self._loop = None

    def _finish_on_loop(self) -> None:
        """On the loop, between two of its transactions: nothing commits until the WAL is all copied."""
        try:
            if self._thread is not None and self._db.checkpoint()[0] >= 0:
                self.restarts_asked += 1
        finally:
            self._asked.clear()


@contextlib.contextmanager
def background_checkpoints(db: Database) -> Iterator[WalCheckpointer | None]:
    """A :class:`WalCheckpointer` running for the block; ``None`` for a database that is not an SQLite
    file (PostgreSQL checkpoints its own log)."""
    if not isinstance(db, Database):
        yield None
        return
    checkpointer = WalCheckpointer(db)
    checkpointer.start()
    try:
        yield checkpointer
    finally:
        checkpointer.stop()
