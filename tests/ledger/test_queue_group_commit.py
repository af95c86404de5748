"""The queue store's group commit: bulk accepts and claims in one transaction, a failing write fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger, LedgerError, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.records import AcceptRequest


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:worker")))
        yield ledger


@pytest.fixture
def store(ledger: Ledger) -> BrokerStore:
    return BrokerStore(ledger.database)


def request(n: int, *, message_id: str | None = None) -> AcceptRequest:
    return AcceptRequest(
        "worker", "agent:worker", message_id or f"m-{n}", "user", {"content": f"task {n}", "n": [n]}, "followup"
    )


def traced(store: BrokerStore) -> list[str]:
    """Every statement the store's connection runs from now on."""
    statements: list[str] = []
    store.database.connection.set_trace_callback(statements.append)
    return statements


def test_an_accepted_item_is_the_stored_row(store: BrokerStore, ledger: Ledger) -> None:
    """The item is built from what was written, not read back: it must equal the row as stored."""

    async def main() -> None:
        item, created = await ledger.queue.accept(request(1))
        assert created and item == store.get_item(item.id)

    asyncio.run(main())


def test_concurrent_claims_are_one_statement_and_accepts_one_transaction(store: BrokerStore, ledger: Ledger) -> None:
    async def main() -> None:
        writes = ledger.queue
        items = [item for item, _ in await asyncio.gather(*(writes.accept(request(n)) for n in range(5)))]
        statements = traced(store)
        await asyncio.gather(*(writes.claim([item.id]) for item in items))
        assert sum(s.startswith("UPDATE queue_items") for s in statements) == 1
        assert statements.count("BEGIN IMMEDIATE") == 1
        assert {row.status for row in store.items()} == {"processing"}

    asyncio.run(main())


def test_a_known_message_id_in_the_same_group_is_a_duplicate(store: BrokerStore, ledger: Ledger) -> None:
    async def main() -> None:
        writes = ledger.queue
        first, again = await asyncio.gather(writes.accept(request(1)), writes.accept(request(2, message_id="m-1")))
        assert first[1] and not again[1] and again[0].id == first[0].id
        assert [row.message for row in store.items()] == [{"content": "task 1", "n": [1]}]

    asyncio.run(main())


def test_a_claim_of_a_finished_item_fails_alone(store: BrokerStore, ledger: Ledger) -> None:
    async def main() -> None:
        writes = ledger.queue
        done, _ = await writes.accept(request(1))
        waiting, _ = await writes.accept(request(2))
        store.claim([done.id])
        store.deliver([done.id], "turn-1")
        outcomes = await asyncio.gather(
            writes.claim([done.id]), writes.claim([waiting.id]), writes.accept(request(3)), return_exceptions=True
        )
        assert isinstance(outcomes[0], LedgerError) and "already finished" in str(outcomes[0])
        assert outcomes[1] is None
        assert isinstance(outcomes[2], tuple) and outcomes[2][1]
        rows = {row.message_id: row.status for row in store.items()}
        assert rows == {"m-1": "delivered", "m-2": "processing", "m-3": "queued"}

    asyncio.run(main())


def test_a_database_failure_reaches_every_caller(store: BrokerStore, ledger: Ledger) -> None:
    async def main() -> None:
        writes = ledger.queue
        store.database.connection.execute("PRAGMA query_only = ON")
        try:
            outcomes = await asyncio.gather(writes.accept(request(1)), writes.claim(["x"]), return_exceptions=True)
        finally:
            store.database.connection.execute("PRAGMA query_only = OFF")
        assert all(isinstance(outcome, LedgerError | sqlite3.Error) for outcome in outcomes)
        assert store.items() == []

    asyncio.run(main())


def test_moving_many_items_looks_each_up_by_its_primary_key(store: BrokerStore) -> None:
    """With dozens of ids SQLite preferred the status index, walking every queued item per move."""
    for n in range(300):
        store.accept(
            agent_id="worker", session_label="agent:worker", message_id=f"m-{n}", sender="user",
            message={"content": "x"}, mode="followup",
        )  # fmt: skip
    ids = [item.id for item in store.items()][:100]
    statements = traced(store)
    store.claim(ids)
    update = next(s for s in statements if s.startswith("UPDATE queue_items"))
    conn = store.database.connection
    conn.set_trace_callback(None)
    template = update.split(" WHERE id IN (")[0] + " WHERE id IN (" + ", ".join("?" * 100) + ")"
    template += " AND" + update.split(") AND", 1)[1]
    plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + template, ids))
    assert "sqlite_autoindex_queue_items_1" in plan and "queue_items_pending" not in plan


def test_a_group_asks_for_its_loop_once(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writes joining a pending group use the loop its first write asked for: in CPython 3.11 every
    ``asyncio.get_running_loop()`` is a ``getpid`` system call, and each accept and claim asked once. A store
    used from a second loop afterwards (the group gone) asks again."""
    asked: list[asyncio.AbstractEventLoop] = []
    running = asyncio.get_running_loop

    def counted() -> asyncio.AbstractEventLoop:
        asked.append(running())
        return asked[-1]

    monkeypatch.setattr(asyncio, "get_running_loop", counted)

    async def main(first: int) -> None:
        writes = ledger.queue
        accepted = await asyncio.gather(*(writes.accept(request(n)) for n in range(first, first + 20)))
        await asyncio.gather(*(writes.claim([item.id]) for item, _ in accepted))
        await writes.grouped(lambda conn: conn.execute("SELECT 1").fetchone())

    asyncio.run(main(0))
    assert len(asked) == 3  # the accepts' group, the claims' group, the grouped write's
    asyncio.run(main(100))  # another loop: its groups ask again, and commit
    assert len(asked) == 6 and asked[3] is not asked[0]
