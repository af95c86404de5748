"""Garbage-collector settings for a process that runs hundreds of executions at once.

With 1,000 executions streaming in one process, CPython's default thresholds (700, 10, 10)
collect the youngest generation hundreds of times a second and the whole heap every second
or two; a full collection walks every tracked object (the modules, the config, the model
catalog, every live run's state) and stops the event loop for tens of milliseconds at a time
— the largest single cause of event-loop lag there after the ledger writes (docs/benchmarks.md,
"1,000 concurrent executions"). :func:`tune_gc_for_many_runs` is what a long-lived host calls
once after startup (``nexus serve`` does): it freezes what startup made (imports, config,
catalog — never garbage) so collections skip it, and collects less often. The process holds
cyclic garbage a little longer in exchange; it is a process-wide choice, so the library never
makes it behind a caller's back.
"""

from __future__ import annotations

import gc

MANY_RUNS_THRESHOLDS = (10_000, 50, 100)
"""(gen0, gen1, gen2) thresholds for many concurrent runs: gen0 every 10,000 net allocations
instead of 700, the older generations correspondingly rarer (measured in the benchmark)."""


def tune_gc_for_many_runs(thresholds: tuple[int, int, int] = MANY_RUNS_THRESHOLDS) -> None:
    """Collect once, freeze the surviving startup heap, and raise the collection thresholds.

    Call it after the process has imported and configured what it needs and before the
    executions start; calling it again freezes what was made since (harmless).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)


__all__ = ["MANY_RUNS_THRESHOLDS", "tune_gc_for_many_runs"]
