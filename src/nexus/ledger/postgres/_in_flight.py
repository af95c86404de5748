"""The transactions on the wire, so a stopping process can end those a silent server never answers.

A server that goes silent (its postmaster or backend ``SIGSTOP``-ed, a proxy between that stops forwarding, a
network that drops packets without a reset) neither answers nor closes: libpq waits for the reply to a statement
already sent for as long as the socket stays open, which is for good. Retrying gives up at a deadline
(``PgDatabase.give_up_by``), but a statement on the wire is not a retry: before, a stop that met one waited on it
forever, first for the aborted run's write and then for the worker threads at the close (SIGTERM did nothing).

Each attempt here keeps a duplicate of its connection's socket while it runs. Once the stop's bound has passed,
:class:`StopWatch` shuts those sockets down (``shutdown(2)`` on the duplicate ends the one socket both name): the
waiting thread reads the end of the connection at once, the attempt fails as a lost connection, and the
transaction, past its deadline, gives up. Nothing of it committed (the server rolls back a transaction whose
connection ends); what it would have written stays as it was, for the next start to recover.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("nexus.ledger")

LATE_ATTEMPT_S = 2.0
"""How long a transaction begun near or after the stop's bound may wait on the server before it is cut: a healthy
server answers in milliseconds, and the process is about to exit."""

WATCH_S = 0.25
"""How often the stop's watch looks at the clock, and once the bound has passed at the transactions on the wire."""


class _Attempt:
    """One attempt on the wire: what it runs (for the log line, formatted only if it is cut), since when, and
    its own duplicate of the connection's socket."""

    __slots__ = ("begin", "cut", "fd", "fn", "started")

    def __init__(self, fn: Callable[[Any], Any], begin: str, fd: int) -> None:
        self.fn, self.begin, self.fd, self.started, self.cut = fn, begin, fd, time.monotonic(), False

    def what(self) -> str:
        """The function it runs and its isolation (``"SqlTurnStore.write.<locals>.fn, READ COMMITTED"``)."""
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"{name}, {self.begin.removeprefix('BEGIN ISOLATION LEVEL ')}"


class InFlight:
    """The attempts on the wire, each with its own duplicate of its connection's socket (closed when it ends)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: set[_Attempt] = set()
        self.abandoned: list[str] = []
        """What a stop cut, one line each (what the transaction was, how long it had waited)."""

    def enter(self, raw: Any, fn: Callable[[Any], Any], begin: str) -> _Attempt:
        """An attempt of ``fn`` on ``raw`` (a psycopg connection) begins: cuttable until :meth:`leave`.
        (Two calls, not a context manager: this runs once per transaction.)"""
        attempt = _Attempt(fn, begin, os.dup(raw.fileno()))
        with self._lock:
            self._attempts.add(attempt)
        return attempt

    def leave(self, attempt: _Attempt) -> None:
        """The attempt ended (committed, failed or cut): its duplicate socket is closed."""
        with self._lock:
            self._attempts.discard(attempt)
        os.close(attempt.fd)

    def cut(self, give_up_at: float) -> int:
        """Shut the sockets of the attempts begun before ``give_up_at``, and of those begun since that have waited
        :data:`LATE_ATTEMPT_S`; returns how many were cut now. Under the lock: an attempt's socket is cut only
        while its attempt runs (its duplicate is closed after it ends, never reused by another connection)."""
        now = time.monotonic()
        cut = 0
        with self._lock:
            for attempt in self._attempts:
                if attempt.cut or now < max(give_up_at, attempt.started + LATE_ATTEMPT_S):
                    continue
                attempt.cut = True
                cut += 1
                waited = f"{attempt.what()}, on the wire for {now - attempt.started:.1f} s"
                self.abandoned.append(waited)
                log.warning(
                    "the ledger database did not answer by the stop's deadline: abandoned a transaction (%s); "
                    "nothing of it was committed, the next start recovers what it held",
                    waited,
                )
                with contextlib.suppress(OSError):
                    _shut(attempt.fd)
        return cut


def _shut(fd: int) -> None:
    """End the connection of socket ``fd`` both ways, without closing ``fd`` (a duplicate is shut and closed)."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        sock.shutdown(socket.SHUT_RDWR)


class StopWatch:
    """Once started, a daemon thread that cuts the attempts still on the wire from the stop's bound on, until
    :meth:`stop` (the database's close, once its workers are done)."""

    def __init__(self, in_flight: InFlight) -> None:
        self._in_flight = in_flight
        self._give_up_at = 0.0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, give_up_at: float) -> None:
        """Cut from ``give_up_at`` on (of two bounds, the earlier holds)."""
        self._give_up_at = give_up_at if self._thread is None else min(self._give_up_at, give_up_at)
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="nexus-pg-stop", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while not self._stopped.wait(WATCH_S):
            if time.monotonic() >= self._give_up_at:
                self._in_flight.cut(self._give_up_at)

    def stop(self) -> None:
        """End the watch (the database is closed)."""
        self._stopped.set()
