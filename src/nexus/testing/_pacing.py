"""The paced chunk waits of every scripted stream on an event loop, woken by one loop timer per tick.

``ScriptedModel(tokens_per_second=...)`` waits after each chunk, as a provider's stream arrives over
time. As one ``call_later`` per chunk (a future, a ``TimerHandle`` with its ``Context``, a heap push
and pop ordered by the Python-level ``TimerHandle.__lt__``, an abort listener closure and its remover),
a thousand scripted streams at once made this test double over half of the event loop's work per chunk
in bench/bench_engine_concurrent.py: the bench measured the double as much as the engine it drives.

Here a wait's due time is rounded UP to a multiple of ``TICK_S`` (a chunk is never early, at most
``TICK_S`` late), waits due in the same tick share one loop timer, and a stream listens for its abort
signal once for its whole life (:class:`Pace`), not once per chunk. An abort still wakes the stream's
current wait at once; a cancelled wait is skipped when its tick fires.

Nothing here holds the loop: a tick's waiters are held by the loop's own timer (the clock keeps only a
weak reference to them), so a loop closed with waits pending keeps no stream alive.
"""

from __future__ import annotations

import asyncio
import math
import weakref

from nexus._per_loop import per_loop
from nexus.llm import AbortSignal

TICK_S = 0.001
"""Chunk waits that fall due within the same ``TICK_S`` seconds share one loop timer."""


class _Tick:
    """The waits of one tick; held strongly only by the loop timer that wakes them."""

    __slots__ = ("__weakref__", "waiters")

    def __init__(self, waiter: asyncio.Future[None]) -> None:
        self.waiters = [waiter]


class PacingClock:
    """The pending chunk waits of one event loop, by tick (see the module docstring)."""

    def __init__(self) -> None:
        self._ticks: dict[int, weakref.ref[_Tick]] = {}

    def wake_at(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None], due: float) -> None:
        """Set ``waiter``'s result at the first tick at or after ``due`` (``loop.time()``), unless done by then."""
        tick = math.ceil(due / TICK_S)
        ref = self._ticks.get(tick)
        joined = ref() if ref is not None else None
        if joined is not None:
            joined.waiters.append(waiter)
            return
        new = _Tick(waiter)
        self._ticks[tick] = weakref.ref(new)
        loop.call_at(tick * TICK_S, self._fire, tick, new)

    def _fire(self, tick: int, due: _Tick) -> None:
        """Loop timer: wake every wait of ``tick`` still pending."""
        self._ticks.pop(tick, None)
        for waiter in due.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def pending(self) -> int:
        """Ticks with a loop timer waiting (for tests and diagnostics)."""
        return len(self._ticks)


clock_of = per_loop(lambda _loop: PacingClock())
"""The pacing clock of a loop (made on first use; goes with the loop)."""


class Pace:
    """One stream's chunk waits: one abort listener for the stream's life, one future per wait.

    Call :meth:`close` when the stream ends (it removes the listener).
    """

    __slots__ = ("_clock", "_loop", "_remove", "_signal", "_waiter")

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._waiter: asyncio.Future[None] | None = None
        self._remove = signal.add_listener(self._abort) if signal is not None else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clock: PacingClock | None = None

    def wait(self, seconds: float) -> asyncio.Future[None]:
        """A future done after ``seconds`` (rounded up to the clock's tick), or at once if the signal aborts.

        A plain future, not a coroutine: a thousand streams each waiting keep no coroutine frame for it.
        """
        loop, clock = self._loop, self._clock
        if loop is None or clock is None:  # a stream runs on one loop: look its clock up once, not per chunk
            loop = self._loop = asyncio.get_running_loop()
            clock = self._clock = clock_of(loop)
        waiter = self._waiter = loop.create_future()
        if self._signal is not None and self._signal.aborted:
            waiter.set_result(None)
        else:
            clock.wake_at(loop, waiter, loop.time() + seconds)
        return waiter

    def _abort(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """Stop listening to the abort signal."""
        if self._remove is not None:
            self._remove()
            self._remove = None
