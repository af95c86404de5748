"""Event-loop lag: how late the loop runs a timer, i.e. how long something blocked it.

A long-running process (``nexus serve``) runs :func:`watch_loop_lag` as a task; every
``interval_s`` it sleeps and records how much later than asked it woke up
(``nexus_event_loop_lag_seconds``). A lag of tens of milliseconds means a blocking call on the
loop (a large synchronous ledger read, a CPU-bound tool) is stalling every stream meanwhile.
"""

from __future__ import annotations

import asyncio
import time

from nexus.telemetry._metrics_api import Metrics

INTERVAL_S = 0.5


async def watch_loop_lag(metrics: Metrics, interval_s: float = INTERVAL_S) -> None:
    """Record the loop's lag every ``interval_s`` seconds until cancelled."""
    clock = time.perf_counter
    while True:
        asked = clock()
        await asyncio.sleep(interval_s)
        metrics.loop_lag(clock() - asked - interval_s)
