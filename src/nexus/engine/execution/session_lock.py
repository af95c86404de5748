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
import hashlib
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal

__all__ = ["recover_orphans", "run_lock", "session_lock", "session_lock_path"]

_POLL_S = 0.05

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

    digest = hashlib.sha256(session_label.encode("utf-8")).hexdigest()[:32]
    return database_dir(database) / "locks" / f"session-{digest}.lock"


@asynccontextmanager
async def session_lock(
    database: str | Path,
    session_label: str,
    *,
    signal: AbortSignal | None = None,
    on_wait: Callable[[], object] | None = None,
) -> AsyncIterator[bool]:
    """Hold the session's lock for the block; yields False if ``signal`` aborted the wait (lock not held).

    ``on_wait`` is called once when another process holds the lock, so a UI can say why
    nothing happens yet. Waiting polls (every 50 ms) and stops when ``signal`` aborts.
    ``database`` may be the ledger's ``path`` string; an in-memory ledger (``:memory:``) is
    private to its process, so it needs no lock.
    """
    try:
        import fcntl
    except ImportError:  # no flock on this platform: no cross-process lock
        yield True
        return
    if str(database) == ":memory:":
        yield True
        return
    path = session_lock_path(database, session_label)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    held = False
    try:
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if signal is not None and signal.aborted:
                    break
                if not told and on_wait is not None:
                    told = True
                    on_wait()
                await asyncio.sleep(_POLL_S)
        yield held
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@asynccontextmanager
async def run_lock(
    ledger: Ledger,
    session_label: str,
    *,
    signal: AbortSignal | None = None,
    on_wait: Callable[[], object] | None = None,
    on_recovered: Callable[[list[str]], object] | None = None,
    orphans: Sequence[str] = (),
) -> AsyncIterator[bool]:
    """:func:`session_lock` for a run, which then reads the head: orphaned turns are recovered first.

    Once the lock is held, the session's open turns left by ended processes are closed as
    ``aborted`` with what they journaled and attached where they belong (see the module
    docstring), and so are ``orphans``: turns of this process the caller knows no run will
    finish (their final write failed; a rescue file may hold their outcome). ``on_recovered``
    gets their ids. Yields False if ``signal`` aborted the wait.
    """
    async with session_lock(ledger.path, session_label, signal=signal, on_wait=on_wait) as held:
        if held:
            recovered = await ledger.turns.recover(session=session_label, turn_ids=orphans) if orphans else []
            recovered += await recover_orphans(ledger, session_label)
            if recovered and on_recovered is not None:
                on_recovered(recovered)
        yield held


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
    recovered = await ledger.turns.recover(session=session_label)
    deadline = time.monotonic() + HANDOFF_S
    while await _others_open(ledger, session_label) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        recovered += await ledger.turns.recover(session=session_label)
    return recovered


async def _others_open(ledger: Ledger, session_label: str) -> bool:
    """Whether the session has an open turn of another process of this host."""
    me = f"{socket.gethostname()}:{os.getpid()}"
    host = socket.gethostname()
    owners = [turn.owner or "" for turn in await ledger.turns.open_turns(session_label)]
    return any(owner != me and owner.rpartition(":")[0] == host for owner in owners)
