"""The clock the adapter supervisor and the block pipeline wait on (injectable, so tests never sleep).

Restart backoff (1 s x 2^n up to 300 s), idle flushes and the human delay between blocks are
all waits; production code waits on :class:`MonotonicClock`, tests pass
``nexus.testing.ManualClock`` and move time by hand.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic seconds and an awaitable sleep."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences mean anything)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` have passed on this clock."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
