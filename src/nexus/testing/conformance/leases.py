"""Session leases (optional ``leases``): one holder at a time, epochs as fencing tokens, expiry and takeover.

The race test needs real concurrent connections: a backend's test module offers them with a ``reopen``
fixture (an async callable opening another ledger on the same database); without it the test is skipped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from nexus.ledger import AcceptRequest, Lease, LeaseLostError, Ledger, NewSession
from nexus.testing.conformance.support import need, reply, user, write_turn

SHORT_MS = 300
"""The time to live of a lease a test lets expire."""

LONG_MS = 60_000
"""The time to live of a lease a test needs held while it works, however slow the machine."""


async def _expired(ledger: Ledger, lease: Lease) -> None:
    """Wait until the database's clock has passed the lease's expiry (it is listed as expired)."""
    for _ in range(200):
        if any(found.session_label == lease.session_label for found in await ledger.leases.expired()):
            return
        await asyncio.sleep(SHORT_MS / 4000)
    raise AssertionError(f"the lease of {lease.session_label} never expired")


async def _cut_short(ledger: Ledger, lease: Lease) -> None:
    """Let a lease held for a test's steps lapse now: renewed for :data:`SHORT_MS`, then waited out. A lease
    acquired with that short a life could expire before the steps that need it held (a loaded machine)."""
    await _expired(ledger, await ledger.leases.renew(lease, SHORT_MS))


async def _queued(ledger: Ledger, session: str, *message_ids: str) -> list[str]:
    await ledger.sessions.ensure(NewSession(session))
    ids = []
    for message_id in message_ids:
        request = AcceptRequest("w", session, message_id, "cli", {"content": "x"}, "followup")
        item, _ = await ledger.queue.accept(request)
        ids.append(item.id)
    return ids


async def test_a_lease_has_one_holder_and_renewing_keeps_its_epoch(ledger: Ledger) -> None:
    need(ledger, "leases")
    first = await ledger.leases.acquire("s", "a", 60_000)
    assert first is not None and (first.holder, first.epoch, first.prior_holder) == ("a", 1, None)
    assert await ledger.leases.acquire("s", "b", 60_000) is None  # held: refused, not queued behind
    again = await ledger.leases.acquire("s", "a", 60_000)  # the holder's own: the same tenure
    assert again is not None and again.epoch == 1 and again.expires_at >= first.expires_at
    renewed = await ledger.leases.renew(first, 120_000)
    assert renewed.epoch == 1 and renewed.expires_at > first.expires_at
    stored = await ledger.leases.get("s")
    assert stored is not None and (stored.holder, stored.epoch) == ("a", 1)
    assert await ledger.leases.get("never-leased") is None
    assert await ledger.leases.expired() == []
    assert await ledger.leases.release(renewed) and not await ledger.leases.release(renewed)
    released = await ledger.leases.get("s")
    assert released is not None and released.holder is None and released.epoch == 1
    with pytest.raises(LeaseLostError):
        await ledger.leases.renew(renewed, 60_000)
    after = await ledger.leases.acquire("s", "b", 60_000)  # a new tenure after a release: a newer epoch
    assert after is not None and (after.holder, after.epoch, after.prior_holder) == ("b", 2, None)
    for bad in (0, -5):
        with pytest.raises(ValueError):
            await ledger.leases.acquire("t", "a", bad)


async def test_an_expired_lease_is_taken_over_with_the_next_epoch(ledger: Ledger) -> None:
    need(ledger, "leases")
    lost = await ledger.leases.acquire("s", "a", SHORT_MS)
    assert lost is not None
    await _expired(ledger, lost)
    assert [lease.holder for lease in await ledger.leases.expired()] == ["a"]
    taken = await ledger.leases.acquire("s", "b", 60_000)
    assert taken is not None and (taken.holder, taken.epoch, taken.prior_holder) == ("b", 2, "a")
    assert await ledger.leases.expired() == []
    with pytest.raises(LeaseLostError, match="epoch 1"):
        await ledger.leases.renew(lost, 60_000)  # the old holder learns it lost, and keeps nothing
    assert not await ledger.leases.release(lost)
    stored = await ledger.leases.get("s")
    assert stored is not None and (stored.holder, stored.epoch) == ("b", 2)
    mine = await ledger.leases.acquire("t", "a", SHORT_MS)
    assert mine is not None
    await _expired(ledger, mine)
    with pytest.raises(LeaseLostError, match="expired"):  # expired is lost, even with nobody taking it
        await ledger.leases.renew(mine, 60_000)
    back = await ledger.leases.acquire("t", "a", 60_000)  # the same holder again: a new tenure all the same
    assert back is not None and back.epoch == 2 and back.prior_holder is None


async def test_a_stale_epoch_writes_nothing_and_the_new_holder_takes_its_items(ledger: Ledger) -> None:
    need(ledger, "leases")
    a_id, b_id = await _queued(ledger, "agent:w", "m1", "m2")
    old = await ledger.leases.acquire("agent:w", "a", LONG_MS)
    assert old is not None
    await ledger.queue.claim([a_id, b_id], lease=old)
    item = await ledger.queue.get(a_id)
    assert item is not None and (item.status, item.attempts) == ("processing", 1)
    await _cut_short(ledger, old)
    new = await ledger.leases.acquire("agent:w", "b", 60_000)
    assert new is not None and new.epoch == old.epoch + 1
    refused = (
        ledger.queue.settle([a_id], "failed", reason="x", lease=old),
        ledger.queue.release([b_id], lease=old),
        ledger.queue.claim([a_id], lease=old),
        write_turn(ledger, None, "agent:w", query_messages=[user("m1")], response_messages=[reply("late")],
                   consumed_queue_items=[a_id, b_id]),
    )  # fmt: skip
    for write in refused:
        with pytest.raises(LeaseLostError):
            await write
    assert await ledger.sessions.head("agent:w") is None  # the stale run's turn moved nothing
    for item_id in (a_id, b_id):
        item = await ledger.queue.get(item_id)
        assert item is not None and (item.status, item.attempts) == ("processing", 1)
    await ledger.queue.claim([a_id, b_id], lease=new)  # the lost run's items: taken over, one more attempt
    turn = await write_turn(
        ledger, None, "agent:w", query_messages=[user("m1")], response_messages=[reply("ok")],
        consumed_queue_items=[a_id, b_id],
    )  # fmt: skip
    for item_id in (a_id, b_id):
        item = await ledger.queue.get(item_id)
        assert item is not None and (item.status, item.attempts, item.turn_id) == ("delivered", 2, turn)
    head = await ledger.sessions.head("agent:w")
    assert head is not None and head.id == turn
    with pytest.raises(LeaseLostError):  # the stale run wakes after its items were delivered: still nothing
        await write_turn(ledger, None, "agent:w", query_messages=[user("m1")], response_messages=[reply("late")],
                         consumed_queue_items=[a_id], status="aborted", lease=old)  # fmt: skip
    head = await ledger.sessions.head("agent:w")
    assert head is not None and head.id == turn


async def test_a_claim_refuses_items_a_valid_lease_holds(ledger: Ledger) -> None:
    need(ledger, "leases")
    (item_id,) = await _queued(ledger, "agent:w", "m1")
    held = await ledger.leases.acquire("agent:w", "a", 60_000)
    assert held is not None
    await ledger.queue.claim([item_id], lease=held)
    await ledger.queue.release([item_id], lease=held)  # a valid lease releases its items
    item = await ledger.queue.get(item_id)
    assert item is not None and (item.status, item.attempts) == ("queued", 0)
    await ledger.queue.claim([item_id], lease=held)
    await ledger.queue.settle([item_id], "failed", reason="could not start", lease=held)
    failed = await ledger.queue.get(item_id)
    assert failed is not None and failed.status == "failed" and failed.error == "could not start"


async def test_an_exhausted_item_is_failed_only_once_its_lease_is_gone(ledger: Ledger) -> None:
    """The takeover's sweep fails items a crash cut ``max_attempts`` times; an item a valid lease holds is
    running (at its last attempt), whoever claimed it, even this very process: failed under its own run, its
    turn was written and the message was "failed" (the fault bench's order check caught it)."""
    need(ledger, "leases")
    (item_id,) = await _queued(ledger, "agent:w", "m1")
    lease = await ledger.leases.acquire("agent:w", "a", LONG_MS)
    assert lease is not None
    for _ in range(3):  # three runs of it (each claim counts an attempt); the third is running now
        await ledger.queue.claim([item_id], lease=lease)
    assert await ledger.queue.fail_exhausted(3) == []
    running = await ledger.queue.get(item_id)
    assert running is not None and (running.status, running.attempts) == ("processing", 3)
    await _cut_short(ledger, lease)  # its run died: the item is a crash's leftover now
    assert [item.id for item in await ledger.queue.fail_exhausted(3)] == [item_id]
    failed = await ledger.queue.get(item_id)
    assert failed is not None and failed.status == "failed"


async def test_racing_acquirers_on_separate_connections_get_one_lease(
    ledger: Ledger, request: pytest.FixtureRequest
) -> None:
    need(ledger, "leases")
    try:
        reopen: Callable[[], Awaitable[Ledger]] = request.getfixturevalue("reopen")
    except pytest.FixtureLookupError:
        pytest.skip("the backend's test module offers no `reopen` fixture (other connections to its database)")
    racers, sessions = 4, 12
    barrier = threading.Barrier(racers)
    won: list[list[Lease]] = [[] for _ in range(racers)]

    async def race(n: int) -> None:
        other = await reopen()
        try:
            for s in range(sessions):
                await asyncio.to_thread(barrier.wait)
                lease = await other.leases.acquire(f"s{s}", f"racer-{n}", 60_000)
                if lease is not None:
                    won[n].append(lease)
        finally:
            await other.aclose()

    threads = [threading.Thread(target=asyncio.run, args=(race(n),)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    leases = [lease for mine in won for lease in mine]
    assert sorted(lease.session_label for lease in leases) == sorted(f"s{s}" for s in range(sessions))
    assert all(lease.epoch == 1 for lease in leases)
    for lease in leases:
        stored = await ledger.leases.get(lease.session_label)
        assert stored is not None and (stored.holder, stored.epoch) == (lease.holder, 1)
