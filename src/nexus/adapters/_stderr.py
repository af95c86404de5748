"""An adapter's stderr, passed on to Nexus's own stderr within a byte budget.

A long-running adapter (``stream``, ``monitor``) lives as long as the broker; left to write
into the broker's stderr directly, a chatty or broken one filled the server's log without
bound (200 MB of adapter output made a 210 MB log). Its stderr is a pipe we read instead, and
what it writes is passed on as it comes — unchanged, so the ``console`` adapter still renders
a reply token by token — paid for from a budget that refills at :data:`RATE_BYTES_S` up to
:data:`BURST_BYTES`. Output over the budget is dropped and counted; the next piece passed on
is preceded by a note saying how much went missing.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from nexus.adapters.clock import Clock

BURST_BYTES = 256 * 1024
"""Bytes of stderr an adapter may write at once before output is dropped."""

RATE_BYTES_S = 4 * 1024
"""Bytes per second the budget refills (about 350 MB a day at most)."""

_CHUNK = 64 * 1024


class StderrBudget:
    """A token bucket of bytes on an injectable clock."""

    def __init__(self, clock: Clock, burst: int = BURST_BYTES, rate: float = RATE_BYTES_S) -> None:
        self.clock = clock
        self.burst = burst
        self.rate = rate
        self.available = float(burst)
        self._at = clock.now()

    def spend(self, size: int) -> bool:
        """Take ``size`` bytes from the budget; False (nothing taken) when they are not there."""
        now = self.clock.now()
        self.available = min(float(self.burst), self.available + (now - self._at) * self.rate)
        self._at = now
        if size > self.available:
            return False
        self.available -= size
        return True


async def forward_stderr(stream: asyncio.StreamReader, name: str, clock: Clock, out: TextIO | None = None) -> None:
    """Pass what ``stream`` carries on to ``out`` (default ``sys.stderr``) within the budget, until it ends."""
    budget = StderrBudget(clock)
    dropped = 0
    while True:
        try:
            chunk = await stream.read(_CHUNK)
        except (ConnectionError, OSError):
            break
        if not chunk:
            break
        if not budget.spend(len(chunk)):
            dropped += len(chunk)
            continue
        if dropped:
            _write(out, _note(name, dropped))
            dropped = 0
        _write(out, chunk)
    if dropped:
        _write(out, _note(name, dropped))


def _note(name: str, dropped: int) -> bytes:
    return f"\n[nexus: {name} wrote more to stderr than is passed on; {dropped} bytes dropped]\n".encode()


def _write(out: TextIO | None, data: bytes) -> None:
    target = out or sys.stderr
    try:
        raw = getattr(target, "buffer", None)
        if raw is not None:
            target.flush()
            raw.write(data)
            raw.flush()
        else:
            target.write(data.decode("utf-8", "replace"))
            target.flush()
    except (OSError, ValueError):  # our own stderr is gone or closed: nothing to pass on to
        pass
