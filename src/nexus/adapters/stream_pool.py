"""The ``stream`` processes of one adapter account: a few of them, so one chat's long reply never holds
up another chat's delivery.

A ``stream`` process takes one delivery at a time (the protocol has no delivery id on its events), so
with a single process per account the second chat waited until the first chat's reply had ended —
on Telegram, a reply that finished at :36 was first shown at :44, with no streaming. The pool starts
another process of the same account (up to ``[adapters.<name>] stream_processes``, default 4) when
every one it has is busy, and reuses idle ones; deliveries to the *same* chat (target) still go one
after another, in the order they came, so a chat never sees two replies interleave. When the burst is
over, the extra processes are stopped after ``stream_idle_s`` idle (default 300 s); the first one stays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from nexus.adapters.stream_client import StreamDelivery, StreamProcess

DEFAULT_STREAM_PROCESSES = 4
"""Processes per account unless ``[adapters.<name>] stream_processes`` says otherwise (``console``: 1)."""

DEFAULT_STREAM_IDLE_S = 300.0
"""How long an extra process (not the account's first) may sit idle before it is stopped
(``[adapters.<name>] stream_idle_s``; 0 keeps them for the life of the process)."""


class StreamPool:
    """Up to ``size`` :class:`StreamProcess`\\ es of one account, each running one delivery at a time.

    A burst of chats grows the pool; afterwards the extra processes are stopped once each has been idle
    ``idle_close_s``, so an account that was busy once does not keep four adapter processes (and their
    connections to the platform) for the rest of the day. The first process stays: the next delivery
    should not pay a start.
    """

    def __init__(
        self, make: Callable[[], StreamProcess], size: int, *, idle_close_s: float = DEFAULT_STREAM_IDLE_S
    ) -> None:
        self._make = make
        self.size = max(1, size)
        self.idle_close_s = idle_close_s
        self.processes: list[StreamProcess] = []
        self.stopped_idle = 0
        """How many extra processes were stopped for being idle (for health and tests)."""
        self._busy: set[StreamProcess] = set()
        self._idle_timers: dict[StreamProcess, asyncio.TimerHandle] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Condition()
        self._chats: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per chat: the lock that keeps its deliveries in order, and how many deliveries hold or wait for it."""

    def primary(self) -> StreamProcess:
        """The first process (started on demand): the account's process when only one is needed."""
        if not self.processes:
            self.processes.append(self._make())
        return self.processes[0]

    @contextlib.asynccontextmanager
    async def delivery(self, chat: str) -> AsyncIterator[StreamDelivery]:
        """A delivery to ``chat`` on a free process, after the chat's earlier deliveries have ended."""
        lock, users = self._chats.get(chat, (asyncio.Lock(), 0))
        self._chats[chat] = (lock, users + 1)
        try:
            async with lock:
                process = await self._take()
                try:
                    async with process.delivery() as delivery:
                        yield delivery
                finally:
                    await self._give(process)
        finally:
            lock, users = self._chats[chat]
            if users == 1:
                del self._chats[chat]  # nobody else waits for this chat: forget it (the pool stays small)
            else:
                self._chats[chat] = (lock, users - 1)

    async def _take(self) -> StreamProcess:
        async with self._freed:
            while True:
                for process in self.processes:
                    if process not in self._busy:
                        self._hold(process)
                        return process
                if len(self.processes) < self.size:
                    process = self._make()
                    self.processes.append(process)
                    self._hold(process)
                    return process
                await self._freed.wait()

    def _hold(self, process: StreamProcess) -> None:
        self._busy.add(process)
        timer = self._idle_timers.pop(process, None)
        if timer is not None:
            timer.cancel()

    async def _give(self, process: StreamProcess) -> None:
        async with self._freed:
            self._busy.discard(process)
            if self.idle_close_s > 0 and process in self.processes and process is not self.processes[0]:
                loop = asyncio.get_running_loop()
                self._idle_timers[process] = loop.call_later(self.idle_close_s, self._stop_idle, process)
            self._freed.notify()

    def _stop_idle(self, process: StreamProcess) -> None:
        """Stop an extra process that stayed idle ``idle_close_s`` (a timer callback: the stop runs as a task)."""
        self._idle_timers.pop(process, None)
        if process in self._busy or process not in self.processes or process is self.processes[0]:
            return
        self.processes.remove(process)
        self.stopped_idle += 1
        task = asyncio.get_running_loop().create_task(process.close(), name="nexus-stream-idle-stop")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def close(self) -> None:
        """Stop every process of the pool (and wait for idle ones being stopped)."""
        for timer in self._idle_timers.values():
            timer.cancel()
        self._idle_timers.clear()
        await asyncio.gather(*(process.close() for process in self.processes), *self._stopping, return_exceptions=True)
