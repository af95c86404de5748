"""The durable queue: idempotent accepts, attempts counted by claims, final settlements, restarts' reads."""

from __future__ import annotations

import asyncio

import pytest

from nexus.ledger import AcceptRequest, Ledger, NewSession, QueueItem, QueueItemsFinishedError
from nexus.testing.conformance.support import need, qa_turn, reply, user, write_turn


def _ask(
    message_id: str, text: str = "hi", *, agent: str = "w", session: str = "agent:w", **kw: object
) -> AcceptRequest:
    message = {"content": text, **kw}
    return AcceptRequest(agent, session, message_id, "cli", message, "followup")


async def _statuses(ledger: Ledger, *ids: str) -> list[tuple[str, int]]:
    items = [await ledger.queue.get(i) for i in ids]
    return [(item.status, item.attempts) for item in items if item is not None]


async def test_accept_is_idempotent_by_message_id(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    item, created = await ledger.queue.accept(_ask("m1", "one"))
    again, created_again = await ledger.queue.accept(_ask("m1", "a retry with other text"))
    assert created and not created_again
    assert again.id == item.id and again.content == "one"  # the first acceptance stands
    assert isinstance(item, QueueItem) and item.status == "queued" and item.attempts == 0
    assert (item.agent_id, item.session_label, item.sender, item.mode) == ("w", "agent:w", "cli", "followup")
    assert [i.id for i in await ledger.queue.pending()] == [item.id]
    stored = await ledger.queue.get(item.id)
    assert stored is not None and stored.message == {"content": "one"} and stored.enqueued_at == item.enqueued_at
    assert await ledger.queue.get("no-such-item") is None


async def test_get_many_reads_items_in_the_order_asked(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    first, _ = await ledger.queue.accept(_ask("m1", "one"))
    second, _ = await ledger.queue.accept(_ask("m2", "two"))
    await ledger.queue.claim([second.id])
    found = await ledger.queue.get_many([second.id, "no-such-item", first.id, second.id])
    assert [None if item is None else (item.id, item.status) for item in found] == [
        (second.id, "processing"), None, (first.id, "queued"), (second.id, "processing"),
    ]  # fmt: skip
    assert found[2] == await ledger.queue.get(first.id)
    assert await ledger.queue.get_many([]) == []


async def test_a_refused_message_id_is_free_for_its_retry(ledger: Ledger) -> None:
    """A row dropped ``refused`` (the sender was told "not queued") does not make the retry a duplicate; the
    refusal stays on record."""
    await ledger.sessions.create(NewSession("agent:w"))
    refused, _ = await ledger.queue.accept(_ask("m1", "one", id="m1"))
    await ledger.queue.settle([refused.id], "dropped", reason="the queue is full", refused=True)
    retried, created = await ledger.queue.accept(_ask("m1", "one", id="m1"))
    assert created and retried.id != refused.id and retried.message_id == "m1"
    stored = await ledger.queue.get(refused.id)
    assert stored is not None and stored.status == "dropped" and stored.to_json()["message_id"] == "m1"
    assert (await ledger.queue.accept(_ask("m1")))[1] is False, "the retry's acceptance is the one that stands"


async def test_many_accepts_at_once_each_stored_once(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    requests = [_ask(f"m{i % 50}", f"text {i}") for i in range(100)]  # every id twice
    outcomes = await asyncio.gather(*(ledger.queue.accept(r) for r in requests))
    created = [item.id for item, new in outcomes if new]
    assert len(created) == 50 and len(set(created)) == 50
    firsts = {item.message_id: item.id for item, new in outcomes if new}
    assert all(item.id == firsts[item.message_id] for item, _ in outcomes)
    assert len(await ledger.queue.pending("w")) == 50


async def test_claim_release_and_settle_count_attempts_and_are_final(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    a, _ = await ledger.queue.accept(_ask("a"))
    b, _ = await ledger.queue.accept(_ask("b"))
    c, _ = await ledger.queue.accept(_ask("c"))
    await ledger.queue.claim([a.id, b.id])
    assert await _statuses(ledger, a.id, b.id, c.id) == [("processing", 1), ("processing", 1), ("queued", 0)]
    await ledger.queue.release([b.id])  # handed back unconsumed: the attempt is taken back
    assert await _statuses(ledger, b.id) == [("queued", 0)]
    turn = await qa_turn(ledger, "agent:w", "a", "done")
    await ledger.queue.settle([a.id], "delivered", turn_id=turn)
    await ledger.queue.settle([b.id], "dropped", reason="queue cap reached")
    await ledger.queue.settle([c.id], "failed", reason="agent removed")
    done = await ledger.queue.get(a.id)
    assert done is not None and done.status == "delivered" and done.turn_id == turn and done.completed_at is not None
    dropped, failed = await ledger.queue.get(b.id), await ledger.queue.get(c.id)
    assert dropped is not None and dropped.error == "queue cap reached"
    assert failed is not None and failed.status == "failed" and failed.error == "agent removed"
    for again in (ledger.queue.claim([a.id]), ledger.queue.settle([b.id], "failed", reason="x")):
        with pytest.raises(QueueItemsFinishedError):
            await again
    with pytest.raises(QueueItemsFinishedError):
        await ledger.queue.claim(["no-such-item"])
    assert await ledger.queue.pending() == []
    assert [i.id for i in await ledger.queue.items(statuses=["failed"])] == [c.id]
    assert [i.id for i in await ledger.queue.items(agent_id="w")] == [a.id, b.id, c.id]


async def test_only_a_waiting_item_is_dropped_and_the_refusal_names_only_the_others(ledger: Ledger) -> None:
    """A drop finds a waiting item beside one a run holds and one finished: nothing moves, and the error names
    the two that could not (not the waiting one, whose move the refused transaction undid), so the caller
    drops it alone on its next try."""
    await ledger.sessions.create(NewSession("agent:w"))
    held, _ = await ledger.queue.accept(_ask("held"))
    done, _ = await ledger.queue.accept(_ask("done"))
    waiting, _ = await ledger.queue.accept(_ask("waiting"))
    await ledger.queue.claim([held.id])
    await ledger.queue.settle([done.id], "failed", reason="gone")
    with pytest.raises(QueueItemsFinishedError) as refused:
        await ledger.queue.settle([held.id, done.id, waiting.id], "dropped", reason="queue cap reached")
    assert refused.value.finished == {held.id: "processing", done.id: "failed"}
    assert await _statuses(ledger, held.id, waiting.id) == [("processing", 1), ("queued", 0)]
    await ledger.queue.settle([waiting.id], "dropped", reason="queue cap reached")
    assert await _statuses(ledger, held.id, waiting.id) == [("processing", 1), ("dropped", 0)]


async def test_a_failed_claim_in_a_group_fails_alone(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    a, _ = await ledger.queue.accept(_ask("a"))
    b, _ = await ledger.queue.accept(_ask("b"))
    await ledger.queue.settle([a.id], "dropped", reason="gone")
    outcomes = await asyncio.gather(
        ledger.queue.claim([a.id]), ledger.queue.claim([b.id]), ledger.queue.accept(_ask("c")), return_exceptions=True
    )
    assert isinstance(outcomes[0], QueueItemsFinishedError) and outcomes[1] is None
    assert await _statuses(ledger, b.id) == [("processing", 1)]
    assert [i.message_id for i in await ledger.queue.pending()] == ["b", "c"]


async def test_a_turn_delivers_the_items_it_consumed_in_its_own_write(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    a, _ = await ledger.queue.accept(_ask("a"))
    b, _ = await ledger.queue.accept(_ask("b"))
    await ledger.queue.claim([a.id, b.id])
    await ledger.queue.settle([b.id], "failed", reason="cut")  # already finished: left as it is
    turn = await write_turn(
        ledger,
        None,
        "agent:w",
        query_messages=[user("a")],
        response_messages=[reply("ok")],
        consumed_queue_items=[a.id, b.id],
    )
    assert await _statuses(ledger, a.id, b.id) == [("delivered", 1), ("failed", 1)]
    delivered = await ledger.queue.get(a.id)
    assert delivered is not None and delivered.turn_id == turn


async def test_exhausted_items_fail_with_their_reason(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    a, _ = await ledger.queue.accept(_ask("a"))
    b, _ = await ledger.queue.accept(_ask("b"))
    for _ in range(3):  # three runs took a and were cut (a crash leaves the item processing)
        await ledger.queue.claim([a.id])
    await ledger.queue.claim([b.id])
    failed = await ledger.queue.fail_exhausted(3)
    assert [i.id for i in failed] == [a.id]
    item = await ledger.queue.get(a.id)
    assert item is not None and item.status == "failed" and "cut 3 times" in (item.error or "")
    assert [i.id for i in await ledger.queue.pending()] == [b.id]


async def test_a_per_sender_session_is_created_with_its_first_message(ledger: Ledger) -> None:
    request = AcceptRequest("w", "w:alice", "m1", "alice", {"content": "hi"}, "collect", session_key="alice")
    item, created = await ledger.queue.accept(request)
    assert created and item.session_label == "w:alice"
    session = await ledger.sessions.get("w:alice")
    assert session.routing_key == "alice"
    await ledger.sessions.create(NewSession("w:bob"))
    with pytest.raises(ValueError, match="not the session of key"):
        await ledger.queue.accept(AcceptRequest("w", "w:bob", "m2", "x", {"content": "x"}, "collect", session_key="x"))
    assert await ledger.queue.get("m2") is None and len(await ledger.queue.pending()) == 1


async def test_an_ask_waits_for_its_reply_until_the_reply_is_accepted(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("agent:w"))
    ask, _ = await ledger.queue.accept(_ask("ask-1", "what is 2+2?", metadata={"reply_to": "boss"}))
    plain, _ = await ledger.queue.accept(_ask("plain-1"))
    await ledger.queue.claim([ask.id, plain.id])
    turn = await qa_turn(ledger, "agent:w", "what is 2+2?", "4")
    await ledger.queue.settle([ask.id, plain.id], "delivered", turn_id=turn)
    waiting = await ledger.queue.unanswered_replies()
    assert [(item.id, asker) for item, asker in waiting] == [(ask.id, "boss")]
    await ledger.sessions.create(NewSession("agent:boss"))
    await ledger.queue.accept(_ask("ask-1:reply", "4", agent="boss", session="agent:boss"))
    assert await ledger.queue.unanswered_replies() == []


async def test_the_feed_returns_what_was_queued_after_a_cursor(ledger: Ledger) -> None:
    need(ledger, "queue_feed")
    await ledger.sessions.create(NewSession("agent:w"))
    start = await ledger.queue.cursor()
    a, _ = await ledger.queue.accept(_ask("a"))
    b, _ = await ledger.queue.accept(_ask("b"))
    await ledger.queue.claim([a.id])
    found, cursor = await ledger.queue.queued_after(start)
    assert [item.id for item in found] == [b.id] and cursor >= start
    assert (await ledger.queue.queued_after(cursor))[0] == []
    held, _ = await ledger.queue.queued_after(start, lambda agent, session, item: item == b.id)
    assert held == []


async def test_the_feed_leaves_arriving_rows_and_keeps_its_cursor_before_them(ledger: Ledger) -> None:
    """A row the caller is queueing itself (``arriving``) is not returned, and the cursor stays before it:
    once it no longer arrives (its sender stopped before holding it), the next read returns it."""
    need(ledger, "queue_feed")
    await ledger.sessions.create(NewSession("agent:w"))
    start = await ledger.queue.cursor()
    a, _ = await ledger.queue.accept(_ask("a"))
    b, _ = await ledger.queue.accept(_ask("b"))
    c, _ = await ledger.queue.accept(_ask("c"))
    found, cursor = await ledger.queue.queued_after(start, None, lambda message_id: message_id == "b")
    assert [item.id for item in found] == [a.id, c.id]
    found, cursor = await ledger.queue.queued_after(cursor, lambda agent, session, item: item == c.id)
    assert [item.id for item in found] == [b.id]
    assert (await ledger.queue.queued_after(cursor))[0] == []


async def test_drops_owed_to_a_summary_are_told_once(ledger: Ledger) -> None:
    """The ``[Queue overflow]`` summary is stored with the queue: a ``summarize`` drop is owed to its session's next
    turn (a broker that died, or another under leases, left it in memory only). The turn that takes it carries it
    until its first message is finished: a retry of that message takes it again, no other turn does."""
    await ledger.sessions.create(NewSession("agent:w"))
    await ledger.sessions.create(NewSession("agent:v"))
    ids = [(await ledger.queue.accept(_ask(f"m{n}", f"text {n}")))[0].id for n in range(5)]
    dropped, carrier, later = ids[:3], ids[3], ids[4]
    other = (await ledger.queue.accept(_ask("o1", agent="v", session="agent:v")))[0].id
    await ledger.queue.settle(dropped[:2], "dropped", reason="queue cap 2 reached", overflow_cap=2)
    await ledger.queue.settle([dropped[2]], "dropped", reason="cleared")  # no summary owed for it
    await ledger.queue.settle([other], "dropped", reason="queue cap 1 reached", overflow_cap=1)
    assert await ledger.queue.take_overflow("agent:w", []) == []
    owed = await ledger.queue.take_overflow("agent:w", [carrier])
    assert [(item.id, item.content, cap) for item, cap in owed] == [
        (dropped[0], "text 0", 2),
        (dropped[1], "text 1", 2),
    ]
    assert await ledger.queue.take_overflow("agent:w", [later]) == [], "carried by a message still to run"
    again = await ledger.queue.take_overflow("agent:w", [carrier, later])
    assert [item.id for item, _ in again] == dropped[:2], "the carrier's retry tells it again"
    await ledger.queue.settle([carrier], "failed", reason="its turn is finished")
    assert await ledger.queue.take_overflow("agent:w", [later]) == [], "told: never again"
    assert [item.id for item, _ in await ledger.queue.take_overflow("agent:v", [later])] == [other]
    assert await _statuses(ledger, *dropped) == [("dropped", 0)] * 3


async def test_a_claim_takes_the_owed_summary_in_its_own_transaction(ledger: Ledger) -> None:
    """``claim(overflow_of=...)`` is ``take_overflow`` done by the claim (a broker that may owe a summary reads
    nothing before its batch): the same items, carried the same way; a plain claim returns none and takes none."""
    await ledger.sessions.create(NewSession("agent:w"))
    ids = [(await ledger.queue.accept(_ask(f"m{n}", f"text {n}")))[0].id for n in range(5)]
    dropped, first, second, third = ids[:2], ids[2], ids[3], ids[4]
    await ledger.queue.settle(dropped, "dropped", reason="queue cap 2 reached", overflow_cap=2)
    assert await ledger.queue.claim([first]) is None, "not asked: nothing taken"
    owed = await ledger.queue.claim([second], overflow_of="agent:w")
    assert owed is not None
    assert [(item.id, item.content, cap) for item, cap in owed] == [
        (dropped[0], "text 0", 2),
        (dropped[1], "text 1", 2),
    ]
    assert await _statuses(ledger, first, second) == [("processing", 1), ("processing", 1)]
    assert await ledger.queue.claim([third], overflow_of="agent:w") == [], "carried by the second message"
    await ledger.queue.release([second])
    again = await ledger.queue.claim([second], overflow_of="agent:w")
    assert again is not None and [item.id for item, _ in again] == dropped, "the carrier's retry takes it again"
    await ledger.queue.settle([second], "failed", reason="its turn is finished")
    assert await ledger.queue.take_overflow("agent:w", [third]) == [], "told: never again"
