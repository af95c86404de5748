"""``nexus serve`` freezes its startup heap: full collections then skip it (they stalled requests 40-125 ms)."""

from __future__ import annotations

import gc

from nexus.server.serve import settle_heap


def test_settle_heap_moves_the_startup_heap_out_of_the_collectors_sight() -> None:
    kept = [{"n": n} for n in range(10_000)]  # stands for the app, its schemas, the modules
    try:
        settle_heap()
        assert gc.get_freeze_count() >= len(kept)
        assert not any(obj is kept for obj in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()
