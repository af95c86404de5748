"""Who owns an open turn or a claimed queue item (``host:pid``), and whether that process died.

Its own module because both the crash journal (:mod:`nexus.ledger._crash`, which marks a dead
owner's queue items delivered) and the queue's claims (:mod:`nexus.ledger._claims`) ask it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def owner() -> str:
    """``host:pid`` of this process (computed per call: a forked child has another pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped by its parent) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Linux: the process has exited and only its exit status is left (``/proc/PID/stat`` state Z or X).

    A SIGKILLed ``nexus`` whose parent has not reaped it yet is such a process; it holds no lock
    and will never finish its turn. Elsewhere (no ``/proc``) this says False.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()
    return bool(fields) and fields[0] in ("Z", "X")


def owner_dead(turn_owner: str | None) -> bool:
    """True when the owner is a process of this host that no longer runs (or is unknown).

    Another host's process cannot be checked, so it counts as alive.
    """
    if not turn_owner:
        return True
    host, _, pid_text = turn_owner.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    return pid != os.getpid() and not pid_alive(pid)
