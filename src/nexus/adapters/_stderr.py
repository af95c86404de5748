"""An adapter's stderr, passed on to Nexus's own stderr within a byte budget.

A long-running adapter (``stream``, ``monitor``) lives as long as the broker; left to write
into the broker's stderr directly, a chatty or broken one filled the server's log without
bound (200 MB of adapter output made a 210 MB log). Its stderr is a pipe we read instead, and
what it writes is passed on as it comes — unchanged, so the ``console`` adapter still renders
a reply token by token — paid for from a budget that refills at :data:`RATE_BYTES_S` up to
:data:`BURST_BYTES`. Output over the budget is dropped and counted; the next piece passed on
is preceded by a note saying how much went missing.

Every secret Nexus knows (:func:`nexus.llm.redact.known_secrets`: the adapters' credentials,
provider keys, server tokens) is cut out on the way, as from error texts: an adapter that logs
its own token must not put it in the server's log. A piece that ends in what could be the
start of a secret keeps that tail back until the next piece shows whether it is one (or
:data:`HOLD_S` passes without one).
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

HOLD_S = 0.5
"""How long a tail that may be the start of a secret is kept back, waiting for the rest."""

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
    scrubber = _Scrubber()
    dropped = 0
    while True:
        try:
            chunk = await _read(stream, hold=bool(scrubber.held))
        except (ConnectionError, OSError):
            break
        if chunk == b"":
            break
        data = scrubber.flush() if chunk is None else scrubber.feed(chunk)
        if not budget.spend(len(data)):
            dropped += len(data)
            continue
        if dropped:
            _write(out, _note(name, dropped))
            dropped = 0
        _write(out, data)
    rest = scrubber.flush()
    if rest and budget.spend(len(rest)):
        _write(out, rest)
    if dropped:
        _write(out, _note(name, dropped))


async def _read(stream: asyncio.StreamReader, *, hold: bool) -> bytes | None:
    """The next piece (``b""`` at the end); None when a held tail waited :data:`HOLD_S` for more in vain."""
    if not hold:
        return await stream.read(_CHUNK)
    try:
        return await asyncio.wait_for(stream.read(_CHUNK), HOLD_S)  # a cancelled read consumes nothing
    except TimeoutError:
        return None


class _Scrubber:
    """Cuts known secrets out of bytes that arrive in pieces, a secret split across two pieces too."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        """What of ``self.held + chunk`` can be passed on now (secrets cut); the rest is held."""
        from nexus.llm import known_secrets, scrub

        secrets = known_secrets()
        data = scrub(self.held + chunk, secrets)
        keep = max((_prefix_at_end(data, secret.encode("utf-8")) for secret in secrets), default=0)
        self.held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        """The held tail, as it is: no secret followed it."""
        held, self.held = self.held, b""
        return held


def _prefix_at_end(data: bytes, secret: bytes) -> int:
    """The length of the longest proper start of ``secret`` that ``data`` ends with (0: none)."""
    for size in range(min(len(secret) - 1, len(data)), 0, -1):
        if data.endswith(secret[:size]):
            return size
    return 0


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
