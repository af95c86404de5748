"""``ManualClock``: a clock whose time moves only when a test says so.

Code under test awaits ``clock.sleep(s)``; the test calls ``await clock.advance(s)`` and every
sleeper whose deadline has passed wakes, in deadline order. ``sleeps`` records each requested
wait, so a test can assert "a 1.6 s pause between the two blocks" without waiting 1.6 s.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools


class ManualClock:
    """A virtual monotonic clock for tests (satisfies ``nexus.adapters.clock.Clock``)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._ids = itertools.count()
        self.sleeps: list[float] = []
        self._sleeper_arrived = asyncio.Event()

    def now(self) -> float:
        return self._now

    async def wait_for_sleeper(self) -> None:
        """Return once some task is sleeping on this clock (real time; the test's own timeout bounds it)."""
        while self.pending == 0:
            self._sleeper_arrived.clear()
            await self._sleeper_arrived.wait()

    @property
    def pending(self) -> int:
        """How many sleepers are waiting for time to move."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._ids), future))
        self._sleeper_arrived.set()
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and let every woken sleeper run."""
        target = self._now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
            for _ in range(5):
                await asyncio.sleep(0)
        self._now = target
        for _ in range(5):
            await asyncio.sleep(0)

    async def settle(self, rounds: int = 20) -> None:
        """Let other tasks run without moving time."""
        for _ in range(rounds):
            await asyncio.sleep(0)


class InstantClock:
    """A virtual clock whose ``sleep`` returns at once after moving time forward (records every wait).

    For code whose waits only need to be *right* (a retry honouring ``retry_after_ms``), not
    interleaved with other tasks in a particular order.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)
