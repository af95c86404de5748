"""One run per session at a time, across processes: a lock file per session next to the ledger.

DESIGN §4.3's serial invariant says parallel messages to one session never fork it. The broker
keeps it with its per-session queue; the embedded entry points (``nexus run``/``chat`` in two
terminals, two scripts calling ``run_agent``) have no queue, so without this the second run to
finish finds the head moved and its turn ends up on a side branch, lost from the session's
history. The lock covers context assembly through the final ledger write, so the second run
waits and then sees the first one's turn as history.

``flock`` locks die with their process, so a killed run never leaves a session locked.
Where ``fcntl`` is missing (Windows) the lock is a no-op.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.llm.abort import AbortSignal

__all__ = ["session_lock", "session_lock_path"]

_POLL_S = 0.05


def session_lock_path(database: Path, session_label: str) -> Path:
    """The lock file of ``session_label`` for the ledger at ``database`` (labels may hold ``/``, so hashed)."""
    digest = hashlib.sha256(session_label.encode("utf-8")).hexdigest()[:32]
    return database.parent / "locks" / f"session-{digest}.lock"


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
    path = session_lock_path(Path(database), session_label)
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
