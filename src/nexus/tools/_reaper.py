"""Ending every process a ``bash`` call started: at the end of the call, and when ``nexus`` dies.

A process group is not enough: ``setsid cmd &`` leaves it, and a SIGKILLed ``nexus`` leaves
its whole tree running. So every call's processes carry a mark in their environment,
``NEXUS_BASH_CALL=<instance>.<n>`` (children inherit it; a nested nexus appends its own mark
after a ``:``), and the end of a call kills every process that carries the call's mark or sits
in the call's session. One small *reaper* process per ``nexus`` process (its own session, no
terminal signals) holds the read end of a pipe from ``nexus``; when that pipe closes — ``nexus``
exited or was killed, even with SIGKILL — it kills every process carrying the instance's mark
and removes the instance's full-output directory.

What escapes: a process that both leaves the session (``setsid``, a double fork) *and* clears
or replaces its environment (``env -i``), and anything started through a service manager
(``systemd-run``, ``at``, a container engine, an already running ``tmux`` server). Needs Linux
``/proc``; elsewhere only the process group is ended.

Run as a script (``python -E -s -S _reaper.py INSTANCE DIR``) it is the reaper; it uses only
the standard library so it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Callable, Collection

MARK_VAR = "NEXUS_BASH_CALL"
_MARK = MARK_VAR.encode() + b"="


def marked_env(token: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a call: ``base`` (default ``os.environ``) with ``token`` appended to the mark."""
    env = dict(os.environ if base is None else base)
    previous = env.get(MARK_VAR)
    env[MARK_VAR] = f"{previous}:{token}" if previous else token
    return env


def _marks(pid: int) -> list[str]:
    """The call marks in a process's environment ([] when unreadable: gone, a zombie, another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return []
    for entry in env.split(b"\0"):
        if entry.startswith(_MARK):
            return entry[len(_MARK) :].decode("utf-8", "replace").split(":")
    return []


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[3])  # state ppid pgrp session …


def find(match: Callable[[list[str]], bool], sessions: Collection[int] = ()) -> list[int]:
    """Pids (never this process) whose marks satisfy ``match``, or that are in one of ``sessions``."""
    me = os.getpid()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        if match(_marks(pid)) or (sessions and _session(pid) in sessions):
            found.append(pid)
    return found


def _open(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _send(pid: int, pidfd: int | None, sig: int) -> None:
    with contextlib.suppress(OSError):
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)


def terminate(pids: Collection[int], grace: float) -> int:
    """SIGTERM ``pids``, SIGKILL those still running after ``grace`` seconds; returns how many were signalled.

    Each process is held by a pidfd first, so a pid reused in between is never signalled.
    """
    held = {pid: _open(pid) for pid in pids}
    try:
        for pid, fd in held.items():
            _send(pid, fd, signal.SIGTERM)
            _send(pid, fd, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
        deadline = time.monotonic() + grace
        running = [fd for fd in held.values() if fd is not None]
        while running and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(running, [], [], min(left, 0.05))
            running = [fd for fd in running if fd not in ready]
        for pid, fd in held.items():
            if fd is None or fd in running:
                _send(pid, fd, signal.SIGKILL)
    finally:
        for fd in held.values():
            if fd is not None:
                os.close(fd)
    return len(held)


def main(argv: list[str]) -> None:
    """The reaper: wait for ``nexus`` to close the pipe, then end its calls' processes and remove DIR."""
    instance, spill_dir = argv[1], argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(65536):
        pass
    prefix = instance + "."
    terminate(find(lambda marks: any(m.startswith(prefix) for m in marks)), grace=1.0)
    shutil.rmtree(spill_dir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
