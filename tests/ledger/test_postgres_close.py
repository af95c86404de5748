"""Closing a PostgreSQL ledger ends its transactions on the open pool, and a closed one refuses at once.

The fault bench's broker that had not exited 60 s after SIGTERM (the database up): the close shut the
pool while a look at the queue (cancelled on the event loop) still ran on a worker thread; each of its
attempts then failed with "the pool is already closed", was taken for a lost connection and retried for
``NEXUS_DB_WAIT_S``, and the close waited for that worker. Real PostgreSQL (a fresh database).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from nexus.ledger import Ledger
from nexus.ledger.errors import LedgerUnavailableError


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short retry bound, so the old behaviour fails this test in seconds, not a minute."""
    monkeypatch.setenv("NEXUS_DB_WAIT_S", "3")


async def test_transactions_under_way_when_the_ledger_closes_end_on_the_open_pool(
    postgres_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXUS_PG_POOL", "1")  # one worker: the second read waits for the first
    ledger = await Ledger.connect(postgres_url)
    database: Any = ledger.database
    reads = [
        asyncio.ensure_future(database.run_read(lambda c, n=n: c.execute(f"SELECT {n} FROM pg_sleep(0.3)").fetchone()))
        for n in (1, 2)
    ]
    await asyncio.sleep(0.1)  # the first under way on the worker, the second queued behind it
    with caplog.at_level(logging.WARNING, logger="nexus.ledger"):
        await ledger.aclose()
        assert [(await read)[0] for read in reads] == [1, 2]
    assert "retrying" not in caplog.text


async def test_a_closed_ledger_refuses_at_once_instead_of_retrying(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = await Ledger.connect(postgres_url)
    database: Any = ledger.database
    await ledger.aclose()
    with caplog.at_level(logging.WARNING, logger="nexus.ledger"), pytest.raises(LedgerUnavailableError) as refused:
        database.read(lambda c: c.execute("SELECT 1").fetchone())
    assert "is closed" in str(refused.value)
    assert "retrying" not in caplog.text
