"""A takeover on PostgreSQL keeps a session's order, and loads each item once, whatever it meets half-way.

Both found by the fault bench (``bench/fault_postgres.py``) and reduced here to the one interleaving each
needs, made deterministic: a real broker (scripted runs) on a real PostgreSQL database, its stores real;
a thin wrapper runs one step of the broker (the takeover's sweep, its reload) at the moment the bench
caught it. The dead holder is a lease taken and an item claimed through the real stores, as a broker
killed mid-run leaves them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from nexus.broker import AgentBroker, BrokerSettings, QueueSettings
from nexus.ledger import Lease, LeaseStore, Ledger, QueueItem, QueueStore
from nexus.testing.broker_runtime import ScriptedRuntime
from nexus.testing.faults import check_ledger, register, requests

TTL_MS = 1500
DEAD_TTL_MS = 200
NEVER_MS = 600_000
Held = Callable[[str, str, str], bool]
"""The broker's own look at the queue: never during a test (each test makes its looks itself)."""


class SweepWhileTheBatchWaits:
    """The ledger's lease store; the first acquire after the dead holder's lease expired lets the takeover's
    sweep run first: it loads the cut item while this broker's batch of later items waits for the lease."""

    def __init__(self, store: LeaseStore, sweep: Callable[[], Awaitable[object]]) -> None:
        self.store, self.sweep, self.swept = store, sweep, False

    async def acquire(self, session_label: str, holder: str, ttl_ms: int) -> Any:
        if not self.swept and await self.store.expired():
            self.swept = True
            await self.sweep()
        return await self.store.acquire(session_label, holder, ttl_ms)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class ReloadedMeanwhile:
    """The ledger's queue store; right after the store watcher's read, the takeover's reload loads the session."""

    def __init__(self, queue: QueueStore, reload: Callable[[str], Awaitable[int]]) -> None:
        self.queue, self.reload = queue, reload

    async def queued_after(
        self, cursor: int, held: Held | None = None, arriving: Callable[[str], bool] | None = None
    ) -> tuple[list[QueueItem], int]:
        items, newest = await self.queue.queued_after(cursor, held, arriving)
        for label in {item.session_label for item in items}:
            await self.reload(label)
        return items, newest

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


def _broker(
    ledger: Ledger, runs: list[list[str]], mode: str, run_s: float = 0.01, started: asyncio.Event | None = None
) -> AgentBroker:
    def heard(event: str, fields: dict[str, object]) -> None:
        if event == "start":
            runs.append(list(cast(list[str], fields["items"])))
            if started is not None:
                started.set()

    settings = BrokerSettings(
        queue=QueueSettings(mode=cast(Any, mode)), leases=True, lease_ttl_ms=TTL_MS, poll_ms=NEVER_MS, wakeups="poll"
    )
    return AgentBroker(ledger, cast(Any, ScriptedRuntime(ledger, run_s, heard)), settings)


async def _accept(ledger: Ledger, count: int, mode: str, first: int = 0) -> list[str]:
    ids = []
    for request in list(requests(1, first + count, (mode,)))[first:]:
        item, _ = await ledger.queue.accept(request)
        ids.append(item.id)
    return ids


async def _dies(ledger: Ledger, dead: Lease) -> None:
    """The dead holder's lease runs out :data:`DEAD_TTL_MS` from now. It is held for long until then: acquired
    with that short a life, it expired before its claims on a loaded machine (they then raised)."""
    await ledger.leases.renew(dead, DEAD_TTL_MS)


async def _all_done(ledger: Ledger) -> None:
    for _ in range(600):
        if not await ledger.queue.pending():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never finished: {await ledger.queue.pending()}")


async def test_a_cut_message_swept_in_while_later_ones_wait_for_the_lease_runs_first(postgres_url: str) -> None:
    """The bench's interrupt session ran ten later messages before the five a dead broker had claimed: the
    sweep loaded those behind the batch that was waiting for the lease, and the takeover handed it back."""
    async with await Ledger.connect(postgres_url) as ledger:
        await register(ledger, 1)
        runs: list[list[str]] = []
        broker = _broker(ledger, runs, "followup")
        await broker.start()  # nothing queued yet
        dead = await ledger.leases.acquire("agent:a0", "a broker killed mid-run", NEVER_MS)
        assert dead is not None
        cut, *later = await _accept(ledger, 3, "followup")
        await ledger.queue.claim([cut], lease=dead)  # its run had started: the cut item is `processing`
        await _dies(ledger, dead)
        takeover = broker._batches.leases
        assert takeover is not None and broker._watcher.sweep is not None
        takeover._store = cast(LeaseStore, SweepWhileTheBatchWaits(takeover._store, broker._watcher.sweep))
        await broker._watcher.adopt()  # the later two (a `processing` row is not adopted): they wait for the lease
        await _all_done(ledger)
        await broker.close()
    assert runs[0] == [cut], f"the cut message ran after later ones: {runs}"
    assert runs == [[cut], *([item] for item in later)]
    await asyncio.to_thread(check_ledger, postgres_url, 3)  # one chain, in the order sent


async def test_an_item_the_watcher_and_a_takeover_both_read_is_queued_once(postgres_url: str) -> None:
    """The watcher checks what it holds when it reads and loads the rows later; a takeover's reload in between
    loaded the same item, and an interrupt session's batch then held it twice (one turn read it twice: the
    bench's "two completed runs of one message")."""
    async with await Ledger.connect(postgres_url) as ledger:
        await register(ledger, 1)
        runs: list[list[str]] = []
        broker = _broker(ledger, runs, "interrupt")
        await broker.start()
        batches = broker._batches
        assert batches.reload is not None
        broker._watcher._queue = cast(QueueStore, ReloadedMeanwhile(ledger.queue, batches.reload))
        ids = await _accept(ledger, 2, "interrupt")
        await broker._watcher.adopt()
        held = [item.item_id for item in broker._slots["a0"].sessions["agent:a0"].queue.items]
        assert sorted(held) == sorted(ids), f"loaded twice: {held}"
        await _all_done(ledger)
        await broker.close()
    assert runs and all(len(items) == len(set(items)) for items in runs), f"a run read a message twice: {runs}"
    await asyncio.to_thread(check_ledger, postgres_url, 2)


class ClaimCommitsAsTheRunEnds:
    """The ledger's queue store; a steer's claim commits (under the run's lease), then returns only once the
    run has ended and its batch had time to let the session's lease go; another broker takes a lease let go."""

    def __init__(self, ledger: Ledger, broker: AgentBroker, steer_id: str) -> None:
        self.ledger, self.queue, self.broker, self.steer_id = ledger, ledger.queue, broker, steer_id

    async def claim(
        self, item_ids: Sequence[str], *, lease: Lease | None = None, overflow_of: str | None = None
    ) -> list[tuple[QueueItem, int]] | None:
        owed = await self.queue.claim(item_ids, lease=lease, overflow_of=overflow_of)
        if list(item_ids) != [self.steer_id]:
            return owed
        session = self.broker._slots["a0"].sessions["agent:a0"]
        run = session.run
        assert run is not None
        await asyncio.wait([cast(Any, run).result])  # the run ends without reading it
        for _ in range(20):  # the batch lets the lease go now, unless it waits for this claim
            stored = await self.ledger.leases.get("agent:a0")
            if stored is not None and stored.holder is None:
                assert await self.ledger.leases.acquire("agent:a0", "another broker", 60_000) is not None
                return owed
            await asyncio.sleep(0.05)
        return owed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)


async def test_a_steer_claimed_as_its_run_ends_is_handed_back_before_the_lease_goes(postgres_url: str) -> None:
    """The bench's `queue` session: the run ended while a steer's claim committed, the batch let the lease go
    (the steer, in flight, did not count as waiting), the hand-back then found the lease gone and the message
    stayed claimed at the old epoch: the next holder, taking a released lease, never loaded it, and it ran
    after six later messages. The batch now waits for the claim: handed back, it keeps the lease here."""
    async with await Ledger.connect(postgres_url) as ledger:
        await register(ledger, 1)
        runs: list[list[str]] = []
        started = asyncio.Event()
        broker = _broker(ledger, runs, "queue", run_s=0.3, started=started)
        await broker.start()
        (first,) = await _accept(ledger, 1, "queue")
        await broker._watcher.adopt()  # its run starts
        await asyncio.wait_for(started.wait(), 60)
        (steer,) = await _accept(ledger, 1, "queue", first=1)
        broker._steerer._queue = cast(QueueStore, ClaimCommitsAsTheRunEnds(ledger, broker, steer))
        await broker._watcher.adopt()  # the second, steered into the run: its claim commits as the run ends
        await _all_done(ledger)
        await broker.close()
    assert runs == [[first], [steer]]
    await asyncio.to_thread(check_ledger, postgres_url, 2)


async def test_a_takeover_fails_a_cut_message_at_its_last_attempt_instead_of_running_it_again(
    postgres_url: str,
) -> None:
    """The bench with `nexus serve` found items tried four times: the takeover's reload loaded a dead holder's
    item already cut three times, and the claim took it over once more (only the sweep failed such items)."""
    async with await Ledger.connect(postgres_url) as ledger:
        await register(ledger, 1)
        runs: list[list[str]] = []
        broker = _broker(ledger, runs, "followup")
        await broker.start()
        dead = await ledger.leases.acquire("agent:a0", "a broker killed mid-run", NEVER_MS)
        assert dead is not None
        cut, later = await _accept(ledger, 2, "followup")
        for _ in range(3):  # three runs of it, each cut (the last by the holder that died)
            await ledger.queue.claim([cut], lease=dead)
        await _dies(ledger, dead)
        await broker._watcher.adopt()  # the later one waits for the lease; the takeover reloads the cut one
        await _all_done(ledger)
        await broker.close()
        item = await ledger.queue.get(cut)
    assert item is not None and (item.status, item.attempts) == ("failed", 3), item
    assert runs == [[later]]
