"""An accept that comes between an agent removal's check and the removal never lands for the removed agent.

Removing an agent is refused while messages wait in its queue: the removal counts them, then marks the agent
removed. The accept did not look at the agent at all, so a message accepted in that instant (by another
process, or a sender that had checked the agent a moment before) landed in the queue of an agent that was then
removed: nobody could list, clear or run it by its id. The accept now reads the agent's status in its own
statement. Here the removal is held right after its count (its clock read, taken for the update that follows)
while another connection accepts a message for the agent; whatever the order the database settles on, one of
the two is refused and no message waits for a removed agent. SQLite and PostgreSQL (its writes are
``SERIALIZABLE``: the two transactions that each miss the other's write form a cycle, one runs again).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from nexus.ledger import AgentHasWaitingMessagesError, AgentRemovedError, Ledger, _agent_registry
from nexus.ledger.broker_store import BrokerStore

HOLD_S = 2.0
"""How long the removal is held after its count at most (SQLite's accept waits for it all that time)."""


@pytest.fixture(params=["sqlite", "postgresql"])
async def two_ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Ledger, Ledger]]:
    """Two ledgers (their own connections) on one database."""
    if request.param == "sqlite":
        with Ledger.open(tmp_path / "agents.db") as first, Ledger.open(tmp_path / "agents.db") as second:
            yield first, second
        return
    url = request.getfixturevalue("postgres_url")
    first = await Ledger.connect(url)
    second = await Ledger.connect(url)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_accept_between_a_removals_check_and_the_removal_never_lands(
    two_ledgers: tuple[Ledger, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    remover, sender = two_ledgers
    await remover.agents.add("gone", spec={})
    counted, accepted = threading.Event(), threading.Event()
    monkeypatch.setattr(_agent_registry, "now_ms", _held_once(_agent_registry.now_ms, counted, accepted))

    removal = asyncio.ensure_future(asyncio.to_thread(BrokerStore(remover.database).remove_agent, "gone"))
    assert await asyncio.to_thread(counted.wait, 10), "the removal never counted the agent's waiting messages"
    accept = asyncio.ensure_future(asyncio.to_thread(_accept, BrokerStore(sender.database)))
    outcomes = await asyncio.gather(accept, return_exceptions=True)
    accepted.set()
    outcomes += await asyncio.gather(removal, return_exceptions=True)

    accept_refused = isinstance(outcomes[0], AgentRemovedError)
    removal_refused = isinstance(outcomes[1], AgentHasWaitingMessagesError)
    assert accept_refused != removal_refused, f"exactly one of the two is refused: {outcomes}"
    assert accept_refused or outcomes[0][1] is True  # type: ignore[index]
    assert removal_refused or outcomes[1] is True
    waiting = await remover.queue.pending("gone")
    if accept_refused:  # the removal went first: the agent is gone and nothing of the message was stored
        assert waiting == [] and await remover.agents.get("gone") is None
    else:  # the accept went first: the agent stays, with its message
        assert [item.message_id for item in waiting] == ["late"] and await remover.agents.get("gone") is not None


def _held_once(clock: Callable[[], int], counted: threading.Event, accepted: threading.Event) -> Callable[[], int]:
    """The registry's clock, but its first read (the removal's, right after its count) waits for the accept."""

    def held() -> int:
        if not counted.is_set():
            counted.set()
            accepted.wait(HOLD_S)  # on SQLite the accept waits for this transaction: it never comes meanwhile
        return clock()

    return held


def _accept(store: BrokerStore) -> tuple[object, bool]:
    return store.accept(
        agent_id="gone", session_label="agent:gone", message_id="late", sender="user",
        message={"content": "sent as the agent was being removed"}, mode="followup",
    )  # fmt: skip
