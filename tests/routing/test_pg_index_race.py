"""Two indexers on one PostgreSQL database: a checkpoint whose insert commits after a higher id's still loads.

Ids come from a sequence, so they are handed out in insert order but become visible in commit order. A
process that loaded "every id above the highest it has" between the two commits skipped the lower id for
good (its in-memory index would not see that checkpoint until a restart; the stored data stays right). Here
process A's insert is held open between its INSERT and its COMMIT, process B indexes and commits a higher
id, and observer C loads before and after A commits. Each "process" has its own ledger (own connections).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.testing.conformance.support import qa_turn

NOW_MS = int(time.time() * 1000)


@pytest.fixture
async def ledgers(postgres_url: str) -> AsyncIterator[list[Ledger]]:
    opened = [await Ledger.connect(postgres_url) for _ in range(4)]
    yield opened
    for ledger in opened:
        await ledger.aclose()


async def _turn(ledger: Ledger, label: str, ask: str, answer: str, completed_at: int) -> str:
    await ledger.sessions.ensure(NewSession(label))
    return await qa_turn(ledger, label, ask, answer, completed_at=completed_at)


def _router(ledger: Ledger) -> Any:
    from nexus.routing import Router

    return Router(ledger, embedder=None)


async def test_a_checkpoint_committed_after_a_higher_id_reaches_another_process_index(ledgers: list[Ledger]) -> None:
    writer, ledger_a, ledger_b, ledger_c = ledgers
    a, b, c = [await asyncio.to_thread(_router, ledger) for ledger in (ledger_a, ledger_b, ledger_c)]
    inserted, release = threading.Event(), threading.Event()
    real_insert = a.store._insert

    def held_insert(conn: Any, checkpoint: Any, embedder: str) -> int:
        checkpoint_id = int(real_insert(conn, checkpoint, embedder))
        inserted.set()  # the row is in A's open transaction: its id is taken, not yet visible
        assert release.wait(30), "the test never released process A"
        return checkpoint_id

    a.store._insert = held_insert
    try:
        late = await _turn(writer, "billing", "Render the PDF invoice when an order is paid", "WeasyPrint", NOW_MS)
        catching_up = asyncio.create_task(asyncio.to_thread(a.catch_up))
        assert await asyncio.to_thread(inserted.wait, 30)
        await _turn(writer, "ops", "Shrink the Docker image", "a multi-stage build", NOW_MS - 60_000)
        assert await asyncio.to_thread(b.catch_up, 1) == 1  # the earlier turn: a higher id, committed first
        await asyncio.to_thread(c.indexer.load)
        assert len(c.index) == 1 and await asyncio.to_thread(c.store.count) == 1  # A's row is not visible yet
        release.set()
        assert await asyncio.wait_for(catching_up, 30) == 1
        assert await asyncio.to_thread(c.store.count) == 2
        await asyncio.to_thread(c.indexer.load)
        assert len(c.index) == 2, "observer C skipped the checkpoint that committed after a higher id"
        # why: both transactions wrote the watermark row, so SERIALIZABLE refused A's and ran it again, with a
        # new id above B's; ids become visible in id order (the store's docstring says so)
        assert a.index.last_id > b.index.last_id
        found = await asyncio.to_thread(
            lambda: c.route("the pdf invoice of a paid order", record=False, catch_up=False)
        )
        assert found.checkpoint is not None and found.checkpoint.turn_id == late
    finally:
        release.set()
        for router in (a, b, c):
            await asyncio.to_thread(router.close)
