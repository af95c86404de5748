"""One run per session at a time, across processes: a lock file per session next to the ledger.

DESIGN §4.3's serial invariant says parallel messages to one session never fork it. The broker
keeps it with its per-session queue; the embedded entry points (``nexus run``/``chat`` in two
terminals, two scripts calling ``run_agent``) have no queue, so without this the second run to
finish finds the head moved and its turn ends up on a side branch, lost from the session's
history. The lock covers context assembly through the final ledger write, so the second run
waits and then sees the first one's turn as history.

``flock`` locks die with their process, so a killed run never leaves a session locked.
Where ``fcntl`` is missing (Windows) the lock is a no-op.

Taking the lock is not enough when the holder was killed: its turn is still open in the
ledger (the head has not moved to it), so a waiter that read the head right away would
continue from the old head, and the killed run's turn - with the user's message - would be
recovered later as a side branch, out of the session's history. :func:`run_lock` therefore
recovers the session's orphaned open turns (closed ``aborted``, attached as the head) right
after the lock is granted and before the caller reads the head (docs/invariants.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # no flock on this platform (Windows): no cross-process lock
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal

__all__ = ["recover_orphans", "run_lock", "session_lock", "session_lock_path"]

_POLL_S = 0.05

YIELD_MAX_S = 1.0
"""How long a process about to take a session's lock lets a waiter of another process go first (see
:class:`_SessionLock`): a waiter polls every :data:`_POLL_S`, so it takes the lock long before this; the bound
only keeps a stopped waiter (SIGSTOP) from holding everyone up."""

HANDOFF_S = 2.0
"""How long a new lock holder waits for the previous holder's process to be gone (it let go of the
lock while exiting: its open turn is an orphan a moment later)."""


def session_lock_path(database: str | Path, session_label: str) -> Path:
    """The lock file of ``session_label`` for the ledger at ``database`` (labels may hold ``/``, so hashed).

    Under the real directory of the database file: every name of one database (a symlink to it) shares them.
    For a PostgreSQL ledger (its URL) under a directory of ``$NEXUS_HOME``: the runs of this machine wait
    for each other; a run on another machine is not seen (its turn would become a side branch).
    """
    from nexus.config import database_dir

    return database_dir(database) / "locks" / f"session-{_digest(session_label)}.lock"


def _digest(session_label: str) -> str:
    """The file-name part of a label's lock (computed once per session for a run's lock: see :data:`_LOCK_FILES`)."""
    return hashlib.sha256(session_label.encode("utf-8")).hexdigest()[:32]


def _open_lock_file(path: str | Path) -> int:
    """The lock file's descriptor, its directory made on first use (or again if it was removed)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


class _SessionLock:
    """:func:`session_lock`'s context manager: a slotted object, not a generator frame, held by every run.

    ``flock`` is not fair: a broker that ends a turn and starts the session's next one takes the lock again at
    once, while a ``nexus run`` of another process polling for it every 50 ms never finds it free (it waited
    for the broker's whole backlog, ~100 s for 19 queued messages). So a waiter says it waits: it holds a
    shared lock on the session's *waiting mark* (``<lock file>.waiting``) until it has the lock, and a process
    about to take the lock first lets a live waiter go ahead (at most :data:`YIELD_MAX_S`). Without a waiter
    this costs one failed ``access`` call; a mark left by an ended waiter is found unlocked and removed.
    """

    __slots__ = ("_fd", "_file", "_held", "_label", "_on_wait", "_path", "_signal", "_waiting")

    def __init__(
        self,
        database: str | Path,
        label: str,
        signal: AbortSignal | None,
        on_wait: Callable[[], object] | None,
        lock_file: str | Path | None = None,
    ) -> None:
        self._path = None if fcntl is None or str(database) == ":memory:" else database
        self._label, self._signal, self._on_wait, self._file = label, signal, on_wait, lock_file
        self._fd = self._waiting = -1
        self._held = False

    async def __aenter__(self) -> bool:
        if self._path is None or fcntl is None:  # in memory (private to the process), or no flock here
            return True
        path = self._file or session_lock_path(self._path, self._label)
        self._fd = _open_lock_file(path)
        try:
            mark = f"{path}.waiting"
            if _marked(mark):
                await _let_a_waiter_go_first(mark, self._signal)
            told = False
            while True:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._held = True
                    self._signal = self._on_wait = None  # not needed while held: the run keeps this object
                    self._stop_waiting()
                    return True
                except BlockingIOError:
                    if self._signal is not None and self._signal.aborted:
                        self._stop_waiting()
                        return False
                    if not told:
                        told = True
                        self._start_waiting(mark)
                        if self._on_wait is not None:
                            self._on_wait()
                    await asyncio.sleep(_POLL_S)
        except BaseException:
            self._release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _start_waiting(self, mark: str) -> None:
        """Hold the waiting mark (shared: every waiter of the session holds it) until the lock is ours."""
        try:
            self._waiting = os.open(mark, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._waiting, fcntl.LOCK_SH)  # fcntl is here: checked on entry
        except OSError:  # no mark (a full disk, a read-only directory): wait as before, unannounced
            self._stop_waiting()

    def _stop_waiting(self) -> None:
        if self._waiting >= 0:
            os.close(self._waiting)  # closing the descriptor lets go of its shared lock
            self._waiting = -1

    def _release(self) -> None:
        self._stop_waiting()
        if self._fd < 0:
            return
        if self._held and fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd, self._held = -1, False


def _marked(mark: str) -> bool:
    """Whether the session has a waiting mark (one ``access`` call, failing when there is none: the usual case).

    Not ``os.path.exists``: its failing ``stat`` builds a ``FileNotFoundError`` (errno text, file name) every
    run, ~10,000 instructions a turn of a broker; ``access`` answers the same question with a bool."""
    return os.access(mark, os.F_OK)


async def _let_a_waiter_go_first(mark: str, signal: AbortSignal | None) -> None:
    """Wait while a live waiter holds ``mark`` (at most :data:`YIELD_MAX_S`); remove a mark nobody holds."""
    deadline = time.monotonic() + YIELD_MAX_S
    try:
        fd = os.open(mark, os.O_RDWR)
    except OSError:  # gone meanwhile (removed by another taker), or unreadable: nobody to let go first
        return
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a waiter holds it: it takes the lock at its next poll
                if time.monotonic() >= deadline or (signal is not None and signal.aborted):
                    return
                await asyncio.sleep(_POLL_S / 5)
                continue
            with contextlib.suppress(OSError):  # no waiter (left): the mark goes; one that opens it now is
                os.unlink(mark)  # only unannounced, as before
            return
    finally:
        os.close(fd)


def session_lock(
    database: str | Path,
    session_label: str,
    *,
    signal: AbortSignal | None = None,
    on_wait: Callable[[], object] | None = None,
) -> AbstractAsyncContextManager[bool]:
    """Hold the session's lock for the block; yields False if ``signal`` aborted the wait (lock not held).

    ``on_wait`` is called once when another process holds the lock, so a UI can say why
    nothing happens yet. Waiting polls (every 50 ms) and stops when ``signal`` aborts.
    ``database`` may be the ledger's ``path`` string; an in-memory ledger (``:memory:``) is
    private to its process, so it needs no lock.
    """
    return _SessionLock(database, session_label, signal, on_wait)


class _RunLock:
    """:func:`run_lock`'s context manager (slotted, as :class:`_SessionLock`)."""

    __slots__ = ("_ledger", "_lock", "_on_recovered", "_orphans", "_session")

    def __init__(
        self,
        ledger: Ledger,
        session_label: str,
        lock: _SessionLock,
        on_recovered: Callable[[list[str]], object] | None,
        orphans: Sequence[str],
    ) -> None:
        self._ledger, self._session, self._lock = ledger, session_label, lock
        self._on_recovered, self._orphans = on_recovered, orphans

    async def __aenter__(self) -> bool:
        held = await self._lock.__aenter__()
        if not held:
            return False
        try:
            ledger, session = self._ledger, self._session
            recovered = await ledger.turns.recover(session=session, turn_ids=self._orphans) if self._orphans else []
            recovered += await recover_orphans(ledger, session)
            if recovered and self._on_recovered is not None:
                self._on_recovered(recovered)
            self._on_recovered, self._orphans = None, ()
        except BaseException:
            self._lock._release()
            raise
        return True

    async def __aexit__(self, *exc: object) -> None:
        self._lock._release()


def run_lock(
    ledger: Ledger,
    session_label: str,
    *,
    signal: AbortSignal | None = None,
    on_wait: Callable[[], object] | None = None,
    on_recovered: Callable[[list[str]], object] | None = None,
    orphans: Sequence[str] = (),
) -> AbstractAsyncContextManager[bool]:
    """:func:`session_lock` for a run, which then reads the head: orphaned turns are recovered first.

    Once the lock is held, the session's open turns left by ended processes are closed as
    ``aborted`` with what they journaled and attached where they belong (see the module
    docstring), and so are ``orphans``: turns of this process the caller knows no run will
    finish (their final write failed; a rescue file may hold their outcome). ``on_recovered``
    gets their ids. Yields False if ``signal`` aborted the wait.
    """
    lock = _SessionLock(ledger.path, session_label, signal, on_wait, _lock_file(ledger, session_label))
    return _RunLock(ledger, session_label, lock, on_recovered, orphans)


_LOCK_DIRS: weakref.WeakKeyDictionary[Ledger, Path] = weakref.WeakKeyDictionary()
"""Each open ledger's lock directory, resolved on its first run: resolving it walks every directory of the
path (``realpath``), a few system calls and path objects per turn of a broker. Kept per ledger, not per
path name: the ledger's connection keeps the file it opened, so its locks stay beside that file even if
a symlink on the way is re-pointed later (a ledger opened after that resolves the path again)."""


_LOCK_FILES: weakref.WeakKeyDictionary[Ledger, dict[str, str]] = weakref.WeakKeyDictionary()
"""Each open ledger's lock files by session label, built once under :data:`_LOCK_DIRS` (a broker runs the
same sessions over and over; a path object per run was ~2 % of a turn's CPU). Bounded by :data:`_CLEAN_MAX`.
Kept as strings: a path object and its parts held about 200 bytes more for every session."""


def _lock_file(ledger: Ledger, session_label: str) -> str | None:
    if fcntl is None or ledger.path == ":memory:":
        return None
    try:
        files = _LOCK_FILES.get(ledger)
        if files is None:
            files = _LOCK_FILES[ledger] = {}
        else:
            known = files.get(session_label)
            if known is not None:
                return known
        locks = _LOCK_DIRS.get(ledger)
        if locks is None:
            locks = _LOCK_DIRS[ledger] = session_lock_path(ledger.path, session_label).parent
    except TypeError:  # a stand-in ledger that takes no weak reference: resolved per run
        return None
    if len(files) >= _CLEAN_MAX:
        files.clear()
    path = files[session_label] = os.path.join(locks, f"session-{_digest(session_label)}.lock")
    return path


async def recover_orphans(ledger: Ledger, session_label: str) -> list[str]:
    """Recover ``session_label``'s open turns of ended processes (call it holding the session's lock).

    Every run opens its turn holding the lock, so an open turn of another process of this host
    found by the new holder belongs to a run that let go: one that ended, or is ending right now
    (``flock`` is released while the process exits, a moment before it is gone). The latter is
    waited for, at most :data:`HANDOFF_S`; a process still running after that does not take the
    lock (not a run of ours) and its turn is left alone.
    """
    if ledger.path == ":memory:":
        return []
    mark = ledger.others_mark()
    clean = _CLEAN.get(ledger) if mark is not None else None
    if clean is not None and clean.get(session_label) == mark:
        return []  # no other process committed since this session had nothing open: it still has none
    if not await ledger.turns.open_turns(session_label):
        if mark is not None:
            _remember_clean(ledger, session_label, mark)
        return []  # nothing open (every run of a broker): one read, not a recovery pass and then this one
    recovered = await ledger.turns.recover(session=session_label)
    deadline = time.monotonic() + HANDOFF_S
    while await _others_open(ledger, session_label) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        recovered += await ledger.turns.recover(session=session_label)
    return recovered


_CLEAN: weakref.WeakKeyDictionary[Ledger, dict[str, int]] = weakref.WeakKeyDictionary()
"""Per open ledger, sessions found with no open turn, and :meth:`Ledger.others_mark` when they were. An
orphan is a turn another process opened (this process's own open turns are never recovered here: their
owner lives), and opening one is a commit of that process, which moves the mark: while it has not moved,
the session still has no orphan, and the lock's check need not read (a broker's every run read it)."""

_CLEAN_MAX = 10_000
"""Sessions remembered per ledger (past it they are forgotten and read again)."""


def _remember_clean(ledger: Ledger, session_label: str, mark: int) -> None:
    try:
        clean = _CLEAN.get(ledger)
        if clean is None:
            clean = _CLEAN[ledger] = {}
    except TypeError:  # a stand-in ledger that takes no weak reference: read every time
        return
    if len(clean) >= _CLEAN_MAX:
        clean.clear()
    clean[session_label] = mark


async def _others_open(ledger: Ledger, session_label: str) -> bool:
    """Whether the session has an open turn of another process of this host."""
    me = f"{socket.gethostname()}:{os.getpid()}"
    host = socket.gethostname()
    owners = [turn.owner or "" for turn in await ledger.turns.open_turns(session_label)]
    return any(owner != me and owner.rpartition(":")[0] == host for owner in owners)
