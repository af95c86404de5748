"""PostgreSQL queue wake-ups: an accept notifies only when it makes an idle session ready, once per commit;
a lease released over waiting work notifies with the session's label."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from nexus.ledger import AcceptRequest, Ledger
from nexus.ledger._leases import WAKE_CHANNEL


@pytest.fixture
def listening(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"LISTEN {WAKE_CHANNEL}")
        yield conn


def _heard(conn: psycopg.Connection[tuple[object, ...]], expected: int = 0) -> list[str]:
    """The notifications that arrived: the first ``expected`` waited for (up to 30 s: under load the server may
    deliver one later than the half second given to the rest), then any more in flight for a moment."""
    heard = [notice.payload for notice in conn.notifies(timeout=30, stop_after=expected)] if expected else []
    return heard + [notice.payload for notice in conn.notifies(timeout=0.5)]


def _ask(n: int, session: str) -> AcceptRequest:
    return AcceptRequest("w", session, f"m{n}-{session}", "cli", {"content": f"m{n}"}, "followup")


async def test_an_accept_notifies_only_an_idle_session_becoming_ready(
    postgres_url: str, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.agents.save("w", role="worker", session_label="agent:w", spec={})
        await ledger.queue.accept(_ask(1, "agent:w"))
        assert _heard(listening, 1) == ["agent:w"]
        lease = await ledger.leases.acquire("agent:w", "broker-1", 60_000)
        assert lease is not None
        await ledger.queue.accept(_ask(2, "agent:w"))  # its holder runs it: nobody else is woken
        assert _heard(listening) == []
        await ledger.queue.accept(_ask(2, "agent:w"))  # a repeated message id accepts nothing
        assert await ledger.leases.release(lease)  # released over waiting work: the others look at it
        assert _heard(listening, 1) == ["agent:w"]


async def test_a_group_commit_notifies_once(
    postgres_url: str, listening: psycopg.Connection[tuple[object, ...]]
) -> None:
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.agents.save("w", role="worker", session_label="agent:w", spec={})
        for n in range(5):
            await ledger.agents.save(f"w{n}", role="worker", session_label=f"agent:w{n}", spec={})
        await asyncio.gather(*(ledger.queue.accept(_ask(n, f"agent:w{n % 5}")) for n in range(40)))
        heard = _heard(listening, 1)
        assert 1 <= len(heard) < 40  # one per committed group, not one per message
        lease = await ledger.leases.acquire("agent:w0", "broker-1", 60_000)
        assert lease is not None
        await ledger.queue.claim([i.id for i in await ledger.queue.pending(session_label="agent:w0")], lease=lease)
        await ledger.queue.settle(
            [i.id for i in await ledger.queue.pending(session_label="agent:w0")], "failed", reason="x", lease=lease
        )
        assert await ledger.leases.release(lease)  # nothing waits in it any more: no wake-up
        assert _heard(listening) == []
