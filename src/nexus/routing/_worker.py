"""The index's worker thread: catches up with new turns when woken, and every ``poll_s`` seconds anyway.

Waking is a ``threading.Event.set()`` — safe and cheap from the event loop — and the catch-up runs
here, so writing a turn never pays for indexing it. A failing catch-up (a busy database, a full disk)
is logged and tried again at the next wake or poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("nexus.routing")


class IndexWorker:
    """A daemon thread running ``catch_up`` on demand and periodically, until :meth:`stop`."""

    def __init__(self, catch_up: Callable[[], object], poll_s: float) -> None:
        self._catch_up = catch_up
        self._poll_s = poll_s
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="nexus-routing-index", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self._poll_s)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._catch_up()
            except Exception:
                log.warning("routing: indexing new turns failed; trying again later", exc_info=True)
