"""The ``stream`` processes of one adapter account: a few of them, so one chat's long reply never holds
up another chat's delivery.

A ``stream`` process takes one delivery at a time (the protocol has no delivery id on its events), so
with a single process per account the second chat waited until the first chat's reply had ended —
on Telegram, a reply that finished at :36 was first shown at :44, with no streaming. The pool starts
another process of the same account (up to ``[adapters.<name>] stream_processes``, default 4) when
every one it has is busy, and reuses idle ones; deliveries to the *same* chat (target) still go one
after another, in the order they came, so a chat never sees two replies interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from nexus.adapters.stream_client import StreamDelivery, StreamProcess

DEFAULT_STREAM_PROCESSES = 4
"""Processes per account unless ``[adapters.<name>] stream_processes`` says otherwise (``console``: 1)."""


class StreamPool:
    """Up to ``size`` :class:`StreamProcess`\\ es of one account, each running one delivery at a time."""

    def __init__(self, make: Callable[[], StreamProcess], size: int) -> None:
        self._make = make
        self.size = max(1, size)
        self.processes: list[StreamProcess] = []
        self._busy: set[int] = set()
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
                index = await self._take()
                try:
                    async with self.processes[index].delivery() as delivery:
                        yield delivery
                finally:
                    await self._give(index)
        finally:
            lock, users = self._chats[chat]
            if users == 1:
                del self._chats[chat]  # nobody else waits for this chat: forget it (the pool stays small)
            else:
                self._chats[chat] = (lock, users - 1)

    async def _take(self) -> int:
        async with self._freed:
            while True:
                for index in range(len(self.processes)):
                    if index not in self._busy:
                        self._busy.add(index)
                        return index
                if len(self.processes) < self.size:
                    self.processes.append(self._make())
                    self._busy.add(len(self.processes) - 1)
                    return len(self.processes) - 1
                await self._freed.wait()

    async def _give(self, index: int) -> None:
        async with self._freed:
            self._busy.discard(index)
            self._freed.notify()

    async def close(self) -> None:
        """Stop every process of the pool."""
        await asyncio.gather(*(process.close() for process in self.processes), return_exceptions=True)
