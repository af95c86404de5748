"""The optional stores: the agent registry and the delivery log."""

from __future__ import annotations

import asyncio

import pytest

from nexus.ledger import (
    AcceptRequest,
    AgentHasWaitingMessagesError,
    AgentRemovedError,
    AgentSessionTakenError,
    DeliveryRecord,
    Ledger,
    NewSession,
)
from nexus.testing.conformance.support import need, qa_turn


async def test_agents_register_with_their_session_and_never_share_one(ledger: Ledger) -> None:
    need(ledger, "agents")
    row = await ledger.agents.save("w", role="worker", session_label="agent:w", spec={"model": "m"})
    assert (row.agent_id, row.role, row.session_label, row.spec) == ("w", "worker", "agent:w", {"model": "m"})
    assert (await ledger.sessions.get("agent:w")).label == "agent:w"  # created with the agent
    with pytest.raises(AgentSessionTakenError):
        await ledger.agents.save("other", role="worker", session_label="agent:w", spec={})
    updated = await ledger.agents.add("w", spec={"tools": ["read"]})  # keeps what it leaves out
    assert updated.role == "worker" and updated.spec == {"model": "m", "tools": ["read"]}
    assert [a.agent_id for a in await ledger.agents.list()] == ["w"]
    assert await ledger.agents.remove("w") and not await ledger.agents.remove("w")
    assert await ledger.agents.get("w") is None and await ledger.agents.list() == []
    await ledger.sessions.get("agent:w")  # the session and its history stay


async def test_another_agents_per_sender_stamped_or_busy_session_is_refused(ledger: Ledger) -> None:
    need(ledger, "agents")
    long_id = "a" * 40  # its per-sender labels keep 32 characters of it
    await ledger.agents.add(long_id, spec={})
    await ledger.sessions.create(NewSession("proj-x", metadata={"agent": long_id}))
    for label in (f"{long_id}~s1", f"{long_id[:32]}~odd!0123456789abcdef", f"agent:{long_id}:user:bob", "proj-x"):
        with pytest.raises(AgentSessionTakenError, match=f"belongs to agent '{long_id}'"):
            await ledger.agents.add("squat", session_label=label, spec={})
    assert await ledger.agents.get("squat") is None
    request = AcceptRequest(long_id, f"agent:{long_id}", "x1", "user", {"content": "X1"}, "followup")
    await ledger.queue.accept(request)
    with pytest.raises(AgentHasWaitingMessagesError, match="1 waiting message"):
        await ledger.agents.remove(long_id)
    await ledger.agents.add(long_id, session_label="moved", spec={})  # it moves on; X1 waits in its old session
    with pytest.raises(AgentSessionTakenError, match="still has 1 unfinished message"):
        await ledger.agents.add("squat", session_label=f"agent:{long_id}", spec={})


async def test_an_accept_for_a_removed_agent_is_refused_in_its_own_transaction(ledger: Ledger) -> None:
    """A sender that saw the agent just before its removal (the HTTP route's check, say): its accept comes after
    the removal committed and is refused there, naming the agent; nothing of it is stored."""
    need(ledger, "agents")
    await ledger.agents.add("gone", spec={})
    await ledger.sessions.ensure(NewSession("agent:w"))  # "w" was never registered: accepted as before

    def message(agent: str, message_id: str) -> AcceptRequest:
        return AcceptRequest(agent, f"agent:{agent}", message_id, "user", {"content": message_id}, "followup")

    first, _ = await ledger.queue.accept(message("gone", "g1"))
    await ledger.queue.settle([first.id], "dropped", reason="cleared")  # its queue cleared: the removal may go
    assert await ledger.agents.remove("gone")
    with pytest.raises(AgentRemovedError, match="agent 'gone' was removed"):
        await ledger.queue.accept(message("gone", "g2"))
    outcomes = await asyncio.gather(  # committed in one group: only the removed agent's accept fails
        ledger.queue.accept(message("w", "w1")), ledger.queue.accept(message("gone", "g3")),
        ledger.queue.accept(message("w", "w2")), return_exceptions=True,
    )  # fmt: skip
    assert isinstance(outcomes[1], AgentRemovedError)
    assert [outcome[1] for outcome in (outcomes[0], outcomes[2])] == [True, True]  # type: ignore[index]
    again, created = await ledger.queue.accept(message("gone", "g1"))  # accepted before: its acceptance stands
    assert not created and again.id == first.id
    assert [item.message_id for item in await ledger.queue.items(agent_id="gone")] == ["g1"]
    await ledger.agents.add("gone", spec={})  # registered again: it takes messages again
    assert (await ledger.queue.accept(message("gone", "g2")))[1]


async def test_deliveries_are_kept_per_turn_and_listed_newest_first(ledger: Ledger) -> None:
    need(ledger, "deliveries")
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    t2 = await qa_turn(ledger, "s", "q2", "a2")

    def record(turn: str, at: int, status: str = "delivered") -> DeliveryRecord:
        target = {"chat_id": 7}
        return DeliveryRecord(turn, "s", "telegram", "main", target, "blocks", status, at, at + 1, ["m1"])  # type: ignore[arg-type]

    first = await ledger.deliveries.record(record(t1, 10))
    second = await ledger.deliveries.record(record(t2, 20, "partial"))
    assert first.id and second.id and first.id != second.id
    found = await ledger.deliveries.for_turns([t1, t2, "01NONE"])
    assert [d.id for d in found[t1]] == [first.id] and [d.status for d in found[t2]] == ["partial"]
    assert found[t1][0].target == {"chat_id": 7} and found[t1][0].message_ids == ["m1"]
    assert [d.id for d in await ledger.deliveries.recent(session_label="s")] == [second.id, first.id]
    with pytest.raises(ValueError, match="delivery status"):
        await ledger.deliveries.record(record(t1, 30, "lost"))
