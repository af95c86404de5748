"""The writer thread hands a batch of written snapshots back to the loop a bounded number of runs per round.

With 1,000 runs streaming, one batch holds the snapshots of hundreds of runs; each run then plans its
next snapshot. Told all in one callback, the loop ran that whole batch in one iteration while every
timer and socket waited; told a bounded number per round, the loop serves the rest in between.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from nexus.engine.execution._snapshots import WRITTEN_PER_ROUND, _written


class _Journal:
    """A run's journal as far as the hand-back goes: it records in which round of the loop it was told."""

    def __init__(self, told: list[tuple[int, int]], rounds: list[int], index: int) -> None:
        self.told, self.rounds, self.index = told, rounds, index

    def snapshot_written(self) -> None:
        self.told.append((self.rounds[0], self.index))


async def test_a_batch_of_written_snapshots_reaches_its_runs_a_bounded_number_per_loop_round() -> None:
    loop = asyncio.get_running_loop()
    rounds = [0]

    def count_rounds() -> None:  # one call per round of the loop
        rounds[0] += 1
        loop.call_soon(count_rounds)

    told: list[tuple[int, int]] = []
    runs = 3 * WRITTEN_PER_ROUND + 5
    journals: list[Any] = [_Journal(told, rounds, i) for i in range(runs)]
    count_rounds()
    loop.call_soon(_written, journals)  # what the writer thread does with a batch it wrote
    for _ in range(5000):
        if len(told) == runs:
            break
        await asyncio.sleep(0.001)
    assert [run for _, run in told] == list(range(runs))  # every run told, in the order of the batch
    per_round = Counter(round_ for round_, _ in told)
    assert max(per_round.values()) <= WRITTEN_PER_ROUND
    assert len(per_round) == 4  # 32 + 32 + 32 + 5, in consecutive rounds
    assert sorted(per_round) == list(range(min(per_round), min(per_round) + 4))
