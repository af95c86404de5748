"""The SQLite connection: pragmas, short write transactions with a bounded busy wait, snapshot reads.

Concurrency model: any number of processes may open the same file. Writers take the
write lock up front (``BEGIN IMMEDIATE``) so a transaction never has to upgrade a read lock
(which SQLite refuses with an immediate SQLITE_BUSY in WAL mode). A busy database is waited
for in short steps (SQLite's busy handler for ``BUSY_STEP_MS``, then the whole transaction is
retried), so the wait can be announced (:attr:`Database.on_busy`: "waiting for the database")
and bounded: after ``NEXUS_DB_WAIT_S`` seconds (default :data:`DEFAULT_WAIT_S`) the caller gets
:class:`LedgerBusyError` - never "database is locked". A full disk gives
:class:`LedgerFullError` (the transaction is rolled back whole).
"""

from __future__ import annotations

import logging
import os
import random
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from nexus.ledger._disk import read_only_place
from nexus.ledger._migrate import migrate
from nexus.ledger._schema import SCHEMA_VERSION
from nexus.ledger.errors import LedgerBusyError, LedgerError, LedgerFullError, LedgerReadOnlyError

T = TypeVar("T")

log = logging.getLogger("nexus.ledger")

BUSY_STEP_MS = 250
"""How long SQLite's own busy handler waits before the transaction is retried (and the wait announced)."""

PAGE_CACHE_KIB = 2_000
"""SQLite's page cache of the ledger's main connection, in KiB (``PRAGMA cache_size`` = minus this): SQLite's
own default, as the second connection for reads has. 16 MB measured no cheaper, in instructions nor CPU time, for
turns and windows on a database of 11 MB (which it held whole) nor for the broker queue; pages outside the cache
are read from the OS's file cache. What it bounds is memory: a process holds this much per connection once
its database is that large (docs/ledger.md, "Page cache")."""

DEFAULT_WAIT_S = 60.0
"""How long a write waits for a database another process holds, unless ``NEXUS_DB_WAIT_S`` says otherwise."""

WAIT_ENV = "NEXUS_DB_WAIT_S"

_SQLITE_FULL, _SQLITE_IOERR = 13, 10

_WARNED: set[str] = set()

_NO_VALUES: dict[object, None] = {}


def bind_none_directly() -> None:
    """Give ``None`` a registered sqlite3 adapter (it answers ``None``, bound as NULL, as before).

    The sqlite3 module binds ``int``, ``float`` and ``str`` as they are, but looks every other value up as
    an adapter: for ``None``, with none registered, it asks its ``PrepareProtocol`` class for
    ``__adapt__``, and that miss builds an ``AttributeError`` and drops it (CPython 3.11). A broker turn
    binds a dozen NULLs: ~30,000 instructions a turn. A registered adapter is found by a dict lookup; the
    one used is C code (an empty dict's ``get``: ``None`` for any argument), so no Python frame either.
    sqlite3's adapters are the process's: an adapter for ``None`` registered before this is kept.
    """
    sqlite3.adapters.setdefault((type(None), sqlite3.PrepareProtocol), _NO_VALUES.get)


bind_none_directly()


def wait_bound() -> float:
    """Seconds a write waits for a locked database: ``$NEXUS_DB_WAIT_S`` (a number >= 0) or :data:`DEFAULT_WAIT_S`."""
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        if raw not in _WARNED:  # once per value, not once per write
            _WARNED.add(raw)
            log.warning("%s=%r is not a number of seconds >= 0; using %g", WAIT_ENV, raw, DEFAULT_WAIT_S)
        return DEFAULT_WAIT_S
    return value


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _is_full(exc: sqlite3.Error) -> bool:
    """SQLITE_FULL, or an I/O error writing the file (how a full disk shows in the WAL or its index)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in (_SQLITE_FULL, _SQLITE_IOERR):
        return True
    text = str(exc).lower()
    return "disk is full" in text or "disk i/o error" in text


def passive_checkpoint(conn: sqlite3.Connection) -> tuple[int, int]:
    """``PRAGMA wal_checkpoint(PASSIVE)`` on ``conn``: ``(frames in the WAL, frames copied)``, or
    ``(-1, -1)`` when it could not run (a full disk, a closed connection): a later one catches up."""
    try:
        _busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error as exc:
        log.debug("WAL checkpoint failed: %s", exc)
        return -1, -1
    return int(frames), int(copied)


def create_private(path: str) -> None:
    """Create a new ledger file readable by its owner only (``0600``); an existing one is left as it is.

    It holds every prompt and reply: SQLite made it ``0644`` (and its ``-wal`` and ``-shm``, which take the
    file's mode) in a ``0755`` home, readable by every user of the machine, where capture and rescue files
    of the same text are ``0600``. An empty file is an empty SQLite database.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:  # there already (or not creatable: the connect says why)
        return


def refuse_second_name(path: str) -> None:
    """Refuse a database file with more than one hard link: through each name it is another database.

    SQLite keeps the write-ahead log beside the name it opens (``h2/agents.db-wal``), so a row committed
    through one name is invisible through the other until a checkpoint writes one name's pages over
    the other's: two brokers on ``h1/agents.db`` and a hard link ``h2/agents.db`` each ran every message,
    and no lock of ours can make two logs one. A symlink is resolved by SQLite and is one database.
    """
    try:
        found = os.stat(path)
    except OSError:  # not there yet (created by the connect), or unreadable: the connect says why
        return
    links = found.st_nlink
    if stat.S_ISREG(found.st_mode) and links > 1:  # a directory's links are its subdirectories
        raise LedgerError(
            f"the ledger {path} has {links} names (hard links); SQLite keeps its write-ahead log beside the "
            "name it opens, so each name would be a different database that overwrites the other. Remove the "
            f"other names (find / -xdev -samefile {path}), or use a symlink, which SQLite resolves"
        )
    if stat.S_ISREG(found.st_mode) and _mount_point(os.path.realpath(path)):
        raise LedgerError(
            f"the ledger {path} is a file mounted on its own (a bind mount of the file alone), another name for "
            "a file elsewhere; SQLite keeps its write-ahead log beside the name it opens, so through each name "
            "it would be a different database that overwrites the other. Bind-mount its directory instead"
        )


def _mount_point(path: str) -> bool:
    """Is ``path`` a mount point (Linux: ``/proc/self/mountinfo``)? False where that cannot be told."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
            points = [line.split(" ", 5)[4] for line in info if line.count(" ") >= 5]
    except OSError:
        return False
    return any(_unescape_mount(point) == path for point in points)


def _unescape_mount(point: str) -> str:
    """A mountinfo path with its octal escapes (``\\040`` for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), point)


def file_version(conn: sqlite3.Connection, path: str) -> int:
    """The schema version of a ledger opened from its file alone, which cannot be migrated: it must be this
    version's (a file of another version is refused, saying why)."""
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found != SCHEMA_VERSION:
        raise LedgerError(
            f"cannot read the ledger {path} read-only: its schema version is {found}, and this Nexus reads "
            f"{SCHEMA_VERSION}; it must be migrated first, which needs some free space"
        )
    return found


class Database:
    """One connection to ``agents.db`` guarded by a lock (safe to share between threads).

    All calls are short (one transaction of a few statements); an asyncio caller can run
    the big ones (history of a very long session, imports) in ``asyncio.to_thread``.
    """

    inline = True
    """Every call runs here and now, without suspending (see ``nexus.ledger._sql_db``)."""

    on_busy: Callable[[], object] | None
    """Called (from the writing thread) once per call that finds the database locked by another
    process, before waiting: a CLI sets it to print "waiting for the database"."""

    file_only: bool
    """Opened from the database file alone (``Ledger.open_file_only``): read without its log, never written."""

    full_seen: bool
    """A write failed for a full disk (and no one has seen the disk with room since): what a health check asks
    before it looks at the disk, so a disk that merely runs low is not called full before a write fails."""

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL", file_only: bool = False) -> None:
        self.path = str(path)
        self.on_busy = None
        self.file_only = file_only
        self.full_seen = False
        if self.path != ":memory:" and not file_only:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            refuse_second_name(self.path)
            create_private(self.path)
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        # immutable=1: SQLite opens the file alone (no -shm, no -wal, no lock), so it needs no room on the disk
        where, uri = (f"{Path(self.path).resolve().as_uri()}?immutable=1", True) if file_only else (self.path, False)
        try:
            conn = sqlite3.connect(
                where, isolation_level=None, check_same_thread=False, timeout=BUSY_STEP_MS / 1000, uri=uri
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the ledger {self.path} ({exc}); give the path of a database file") from exc
        self._conn = conn
        try:
            self.found_version = file_version(conn, self.path) if file_only else self._setup(conn, synchronous)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, LedgerFullError):  # `nexus sessions list` on a full disk said "cannot write"
                raise LedgerFullError(
                    f"cannot open the ledger {self.path}: {exc.__cause__ or exc} (is the disk full? SQLite needs a "
                    f"little room beside the file, {Path(self.path).name}-shm, even to read it); free some space"
                ) from exc
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError | LedgerError):
                raise LedgerError(
                    f"{self.path} is not a usable ledger database ({exc}); move it aside and open again to start a "
                    "new one, or point NEXUS_HOME elsewhere"
                ) from exc
            read_only = read_only_place(Path(self.path)) if isinstance(exc, sqlite3.OperationalError) else None
            if read_only is not None:  # `nexus db check` called a whole ledger on a read-only mount DAMAGED
                raise LedgerReadOnlyError(
                    f"cannot open the ledger {self.path} ({exc}): {read_only}, and SQLite needs to make "
                    f"{Path(self.path).name}-shm beside it even to read it"
                ) from exc
            if isinstance(exc, sqlite3.OperationalError) and not _is_busy(exc):
                raise LedgerError(
                    f"cannot open the ledger {self.path} ({exc}); check the path and its permissions"
                ) from exc
            raise

    def _setup(self, conn: sqlite3.Connection, synchronous: str) -> int:
        """Pragmas and migrations of a new connection; returns the schema version the file had."""
        conn.execute(f"PRAGMA busy_timeout = {BUSY_STEP_MS}")
        if self.path != ":memory:":
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        # NORMAL in WAL mode: a committed transaction survives a process crash (the WAL is
        # written before COMMIT returns); only an OS crash/power loss can lose the last commits.
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
        return self._retry(lambda: migrate(conn))

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection (for tests and the conformance suite; hold no transaction open on it)."""
        return self._conn

    def set_wal_autocheckpoint(self, pages: int) -> None:
        """How many WAL pages a commit may leave before it checkpoints them itself (SQLite's default: 1000).

        A long-running process raises it while a :class:`~nexus.ledger._checkpoint.WalCheckpointer`
        checkpoints on its own thread, so no commit on the event loop pays for a checkpoint.
        """
        with self._lock:
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def checkpoint(self) -> tuple[int, int]:
        """Copy what the WAL holds back into the database file from this connection (PASSIVE: it
        never waits for, nor blocks, another connection). Returns ``(frames in the WAL, frames
        copied)``; ``(-1, -1)`` when it could not run (another process checkpoints, a full disk).

        Run by the writer between its transactions it catches the WAL up completely, so the
        writer's next commit starts the WAL over from its beginning (see
        :mod:`nexus.ledger._checkpoint`).
        """
        with self._lock:
            return passive_checkpoint(self._conn)

    def data_version(self) -> int | None:
        """SQLite's ``PRAGMA data_version`` on this connection: it changes when another connection (another
        process) commits, never for this connection's own commits. ``None`` while another thread's write
        holds the connection: asking would wait for that transaction (on the event loop, at every run's
        start while the ledger's writer thread opens the others' turns); the caller reads instead."""

        def attempt() -> int:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._retry(attempt)
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the connection (and the second one reads may have opened); further calls fail."""
        with self._lock, self._read_lock:
            self._conn.close()
            if self._reader is not None:
                self._reader.close()

    def _retry(self, fn: Callable[[], T], wait_s: float | None = None) -> T:
        """Run ``fn``; while the database is busy, retry it until ``wait_s`` (default :func:`wait_bound`) passed."""
        start = time.monotonic()
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            self._raise_unless_busy(exc)
            busy = exc
        return self._retry_busy(fn, wait_s, start, busy)

    def _retry_busy(self, fn: Callable[[], T], wait_s: float | None, start: float, busy: Exception) -> T:
        """The waits of :meth:`_retry` once ``fn`` found the database busy (the bound is read only now:
        an environment lookup on every write was 1.4 % of the broker's queue path)."""
        budget = wait_bound() if wait_s is None else wait_s
        deadline = start + budget
        delay = 0.002
        told = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LedgerBusyError(
                    f"{self.path} stayed locked by another process for {budget:g} s; find the process holding "
                    f"it (e.g. `fuser {self.path}`), or wait longer with {WAIT_ENV}=SECONDS"
                ) from busy
            if not told:
                told = True
                self._tell_busy()
            time.sleep(min(delay * (1 + random.random()), left))
            delay = min(delay * 2, 0.2)
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                self._raise_unless_busy(exc)
                busy = exc

    def _raise_unless_busy(self, exc: sqlite3.OperationalError) -> None:
        """A full disk as :class:`LedgerFullError`, any other error but a busy database as itself."""
        if _is_full(exc):
            self.full_seen = True
            raise LedgerFullError(
                f"cannot write to the ledger {self.path}: {exc} (is the disk full?); free some space"
            ) from exc
        if not _is_busy(exc):
            raise exc

    def _tell_busy(self) -> None:
        """Run :attr:`on_busy` (its failure must not turn a wait into a failed write)."""
        if self.on_busy is None:
            return
        try:
            self.on_busy()
        except Exception:
            log.debug("on_busy callback failed", exc_info=True)

    def write(
        self, fn: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None, row_locks: bool = False
    ) -> T:
        """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction; retried whole on a busy database.

        ``fn`` must only touch the database (it may run more than once); any exception it
        raises rolls everything back. ``wait_s`` bounds the wait for a busy database (default
        :func:`wait_bound`); best-effort writes (the crash journal) pass a short one. ``row_locks``
        changes nothing here: the write lock taken up front already makes every write run alone.
        """

        if self.file_only:
            raise LedgerFullError(
                f"cannot write to the ledger {self.path}: it is open read-only, from the database file alone, "
                "because the disk is full; free some space"
            )

        def attempt() -> T:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:  # a full disk can fail the rollback too; the original error matters
                        log.debug("rollback failed", exc_info=True)
                raise
            return result

        with self._lock:
            return self._retry(attempt, wait_s)

    @property
    def location(self) -> str:
        """Where the ledger is, for messages and rescue files: the file's path (or ``:memory:``)."""
        return self.path

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call()`` (which reads and writes through this database) inline."""
        return call()

    async def run_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`read` for the async stores: inline (a read here is short and never waits on a network)."""
        return self.read(fn)

    async def run_write(
        self, fn: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None, row_locks: bool = False
    ) -> T:
        """:meth:`write` for the async stores: inline, like :meth:`run_read`."""
        return self.write(fn, wait_s=wait_s)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one read transaction, so multi-statement reads see one snapshot.

        While another thread's write holds the connection, the read goes through a second connection
        (made on first need) instead of waiting for that transaction: in WAL mode a reader never waits
        for the writer, and it sees every transaction committed before it began, as it would have had
        it come a moment earlier. A read inside this thread's own write stays on that write's connection.
        """
        if self._lock.acquire(blocking=False):
            try:
                return self._retry(lambda: _read_in(self._conn, fn))
            finally:
                self._lock.release()
        with self._read_lock:
            reader = self._reader_connection()
            if reader is not None:
                return self._retry(lambda: _read_in(reader, fn))
        with self._lock:
            return self._retry(lambda: _read_in(self._conn, fn))

    def _reader_connection(self) -> sqlite3.Connection | None:
        """The second connection of :meth:`read` (under ``_read_lock``); none for ``:memory:`` or a file-only ledger."""
        if self._reader is None and self.path != ":memory:" and not self.file_only:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_STEP_MS / 1000
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_STEP_MS}")
            conn.execute("PRAGMA query_only = ON")
            self._reader = conn
        return self._reader


def _read_in(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn(conn)`` in one read transaction on ``conn``."""
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")
