"""The queue's group commit on PostgreSQL: a group's accepts in one statement, settles joining the group, and a
conflict inside a group retried whole rather than failing one caller.

Real PostgreSQL (a fresh database per test); the conflict is a real ``serialization_failure`` raised by the
server (a trigger on ``queue_items``, armed by a sequence: sequences are not rolled back with a transaction).
"""

from __future__ import annotations

import asyncio

import psycopg

from nexus.ledger import AcceptRequest, Ledger, NewSession, QueueItem, QueueItemsFinishedError


def _request(message_id: str, session: str = "agent:w") -> AcceptRequest:
    return AcceptRequest("w", session, message_id, "user", {"content": message_id}, "followup")


async def test_a_group_of_accepts_is_idempotent_within_the_group_and_across_groups(postgres_url: str) -> None:
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.ensure(NewSession("agent:w"))
        (first, created), _ = await ledger.queue.accept(_request("m0")), None
        assert created
        ids = ["m0", "m1", "m1", "m2"]  # m0 known already, m1 twice in one group
        outcomes = await asyncio.gather(*(ledger.queue.accept(_request(i)) for i in ids))
        assert [created for _, created in outcomes] == [False, True, False, True]
        assert outcomes[0][0].id == first.id and outcomes[1][0].id == outcomes[2][0].id
        rows = await ledger.queue.items()
        assert sorted(item.message_id for item in rows) == ["m0", "m1", "m2"]


async def test_settles_and_claims_of_one_loop_iteration_share_a_group_and_keep_their_outcomes(
    postgres_url: str,
) -> None:
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.ensure(NewSession("agent:w"))
        items: list[QueueItem] = [(await ledger.queue.accept(_request(f"m{n}")))[0] for n in range(4)]
        await ledger.queue.claim([items[1].id])  # m0 waits (only a waiting item is dropped), m1 runs
        done = await asyncio.gather(
            ledger.queue.settle([items[0].id], "dropped", reason="gone"),
            ledger.queue.settle([items[1].id], "failed", reason="cut"),
            ledger.queue.claim([items[2].id]),
            ledger.queue.settle([items[0].id], "failed", reason="twice"),  # finished in this group already
            return_exceptions=True,
        )
        assert done[:3] == [None, None, None] and isinstance(done[3], Exception)
        states = {item.message_id: (item.status, item.error) for item in await ledger.queue.items()}
    assert states == {"m0": ("dropped", "gone"), "m1": ("failed", "cut"), "m2": ("processing", None),
                      "m3": ("queued", None)}  # fmt: skip


_ARM = """
CREATE SEQUENCE fault_once;
CREATE FUNCTION fault_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('fault_once') = 2 THEN
    RAISE EXCEPTION 'injected conflict' USING ERRCODE = 'serialization_failure';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fault_once BEFORE UPDATE ON queue_items FOR EACH ROW EXECUTE FUNCTION fault_once();
"""


async def test_a_conflict_while_a_group_runs_write_by_write_is_retried_not_handed_to_one_caller(
    postgres_url: str,
) -> None:
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.ensure(NewSession("agent:w"))
        a, _ = await ledger.queue.accept(_request("a"))
        b, _ = await ledger.queue.accept(_request("b"))
        await ledger.queue.settle([b.id], "dropped", reason="gone")
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(_ARM)
        # one group: the claim of b (finished) fails it, so it runs write by write; the claim of a then meets
        # the conflict (the trigger's 2nd firing): that transaction is run again, a's claim succeeds
        done = await asyncio.gather(ledger.queue.claim([a.id]), ledger.queue.claim([b.id]), return_exceptions=True)
        assert done[0] is None, done[0]
        assert "already finished" in str(done[1])
        claimed = await ledger.queue.get(a.id)
        assert claimed is not None and claimed.status == "processing" and claimed.attempts == 1


async def test_a_claim_alone_in_its_group_that_is_refused_is_tried_once(postgres_url: str) -> None:
    """A broker that takes a session over claims items another broker already delivered (its copy in memory
    is stale): refused. Alone in its group, that claim is not run a second time write by write (it would
    meet the same refusal): 3 brokers met 1.5 such claims per turn, each a whole transaction more."""
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.ensure(NewSession("agent:w"))
        item, _ = await ledger.queue.accept(_request("a"))
        await ledger.queue.claim([item.id])
        await ledger.queue.settle([item.id], "failed", reason="run elsewhere")
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(_COUNT_UPDATES)
            try:
                await ledger.queue.claim([item.id])
            except QueueItemsFinishedError as exc:
                assert "already finished" in str(exc)
            else:
                raise AssertionError("a delivered item was claimed again")
            row = admin.execute("SELECT last_value, is_called FROM queue_updates").fetchone()
        assert row is not None and row[1] and row[0] == 1  # one UPDATE of the queue: the claim, once


_COUNT_UPDATES = """
CREATE SEQUENCE queue_updates;
CREATE FUNCTION count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM nextval('queue_updates'); RETURN NULL; END $$;
CREATE TRIGGER count_updates AFTER UPDATE ON queue_items FOR EACH STATEMENT EXECUTE FUNCTION count_update();
"""


async def test_one_process_s_concurrent_turn_writes_on_many_sessions_do_not_conflict(postgres_url: str) -> None:
    """24 runs ending at once on 24 sessions write their turns without a serialization failure (turn writes
    run READ COMMITTED behind their session's row lock; before, SERIALIZABLE writes of one broker conflicted
    and were retried, and then ran one at a time)."""
    from nexus.ledger import TurnWrite
    from nexus.llm.types import AssistantMessage, TextContent, UserMessage

    async with await Ledger.connect(postgres_url) as ledger:
        labels = [f"agent:s{n}" for n in range(24)]
        for label in labels:
            await ledger.sessions.ensure(NewSession(label))

        async def turn(label: str, n: int) -> str:
            reply = AssistantMessage([TextContent(f"reply {n}")], provider="p", model="m")
            return await ledger.turns.write(
                TurnWrite(label, query_messages=[UserMessage(f"q {n}")], response_messages=[reply], status="completed")
            )

        for n in range(3):
            written = await asyncio.gather(*(turn(label, n) for label in labels))
            assert len(set(written)) == len(labels)
        assert ledger.database.conflicts == 0  # type: ignore[attr-defined]
