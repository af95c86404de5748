"""The planned snapshots of every run on an event loop, fired by one loop timer per tick of ``TICK_S``.

Each streaming run plans its next journal snapshot ~0.25 s ahead. As one ``call_later`` per run
and snapshot, 1,000 runs kept ~1,000 more timers in the loop's heap and made and popped 4,000 a
second; the heap orders them with ``TimerHandle.__lt__``, a Python call per comparison, ~11 of
them per pop, and every other timer of the loop (a socket's timeout, a model's pacing) paid for
the deeper heap too. Here a plan is an entry in the list of its tick (its due time rounded UP to
a multiple of ``TICK_S``, so a snapshot is never early and at most ``TICK_S`` late), and only
the first plan of a tick asks the loop for a timer: with 1,000 runs, a few dozen timers instead.

A plan is withdrawn by forgetting it on the journal's side (``Planned.tick = None``, or a new
tick): its entry stays in the list and is skipped when the tick fires. Entries hold their
journal weakly, so a loop closed with ticks pending keeps no run's state alive.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from typing import Protocol

from nexus._per_loop import per_loop

TICK_S = 0.01
"""Snapshot plans that fall due within the same ``TICK_S`` seconds share one loop timer."""


class Planned(Protocol):
    """A run's journal as the clock sees it (``_journal.TurnJournal``)."""

    tick: int | None

    def due(self) -> None: ...


class SnapshotClock:
    """The snapshot plans of one event loop, by tick (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop_ref = weakref.ref(loop)
        self._ticks: dict[int, list[weakref.ref[Planned]]] = {}

    def plan(self, journal: Planned, due: float) -> None:
        """Call ``journal.due()`` at the first tick at or after ``due`` (``time.monotonic()``) unless
        ``journal.tick`` changed by then."""
        tick = math.ceil(due / TICK_S)
        journal.tick = tick
        planned = self._ticks.get(tick)
        if planned is not None:
            planned.append(weakref.ref(journal))
            return
        self._ticks[tick] = [weakref.ref(journal)]
        loop = self._loop_ref()
        assert loop is not None  # plans are made on the running loop
        loop.call_later(tick * TICK_S - time.monotonic(), self._fire, tick)

    def _fire(self, tick: int) -> None:
        """Loop timer: every plan of ``tick`` still standing is due."""
        for ref in self._ticks.pop(tick, ()):
            journal = ref()
            if journal is not None and journal.tick == tick:
                journal.due()

    def pending(self) -> int:
        """Ticks with a loop timer waiting (for tests and diagnostics)."""
        return len(self._ticks)


clock_of = per_loop(SnapshotClock)
"""The snapshot clock of a loop (made on first use; goes with the loop)."""
