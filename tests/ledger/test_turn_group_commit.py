"""A broker turn's final write joins the queue's group commit (``turns.write(..., via=ledger.queue.grouped)``):
one transaction with the accepts and claims of its loop round, every caller told its own outcome, and the turn
store's memory of what is written updated only once the group committed."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nexus.ledger import Ledger, LedgerFullError, NewSession, TurnDetails, TurnOpen, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.errors import HeadMovedError, TurnNotSavedError
from nexus.ledger.records import AcceptRequest
from nexus.testing.conformance.support import reply, user


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:worker")))  # the queue's session
        yield ledger


def opened(ledger: Ledger, session: str) -> str:
    """A session with one closed turn and an opened one (a run's); the opened turn's id."""
    run_inline(ledger.sessions.ensure(NewSession(session)))
    first = TurnWrite(session, None, query_messages=[user("q1")], response_messages=[reply("a1")])
    run_inline(ledger.turns.write(first))
    return run_inline(ledger.turns.open(TurnOpen(session, [user("q2")], TurnDetails(model="m", provider="p"))))


def closing(session: str, turn_id: str, text: str) -> TurnWrite:
    """The run's final write; its reply names a model no earlier turn did (a new ``origins`` row)."""
    answer = replace(reply(text), model="other-model")
    return TurnWrite(session, turn_id, response_messages=[answer], status="completed", stop_reason="end_turn")


async def accept(ledger: Ledger, n: int) -> Any:
    """An accept made from a task, like the turn writes beside it (all join the group of the same round)."""
    request = AcceptRequest("worker", "agent:worker", f"m-{n}", "user", {"content": f"task {n}"}, "followup")
    return await ledger.queue.accept(request)


class FullAtCommit:
    """The ledger's connection, but every ``COMMIT`` fails as on a full disk (SQLite keeps the transaction open)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def statuses(ledger: Ledger, *turn_ids: str) -> list[str]:
    return [run_inline(ledger.turns.get(turn_id)).status for turn_id in turn_ids]


async def _accept_and_close_both(ledger: Ledger, one: str, two: str, *, return_exceptions: bool = False) -> list[Any]:
    """An accept and the closing writes of turns ``one`` (session s1) and ``two`` (s2), in one loop round: one group."""
    grouped = ledger.queue.grouped
    return await asyncio.gather(
        accept(ledger, 1),
        ledger.turns.write(closing("s1", one, "one"), via=grouped),
        ledger.turns.write(closing("s2", two, "two"), via=grouped),
        return_exceptions=return_exceptions,
    )


def test_turn_writes_and_an_accept_of_one_round_commit_together(ledger: Ledger) -> None:
    one, two = opened(ledger, "s1"), opened(ledger, "s2")
    statements: list[str] = []
    ledger.database.connection.set_trace_callback(statements.append)

    (item, created), first, second = asyncio.run(_accept_and_close_both(ledger, one, two))
    assert (statements.count("BEGIN IMMEDIATE"), statements.count("COMMIT")) == (1, 1)
    assert created and (first, second) == (one, two)
    assert statuses(ledger, one, two) == ["completed", "completed"]
    assert "other-model" in str(ledger.turns._origins.known)  # known once committed
    assert [run_inline(ledger.sessions.head(s)).id for s in ("s1", "s2")] == [one, two]  # type: ignore[union-attr]
    statements.clear()
    assert [m.role for m in run_inline(ledger.turns.messages(one))] == ["user", "assistant"]
    assert statements == []  # answered from the rows the committed write kept
    ledger.database.connection.set_trace_callback(None)
    assert run_inline(ledger.queue.get(item.id)) is not None


def test_a_failed_group_commit_rescues_every_turn_and_leaves_nothing_written(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = opened(ledger, "s1"), opened(ledger, "s2")
    db: Any = ledger.database
    monkeypatch.setattr(db, "_conn", FullAtCommit(db.connection))

    accepted, first, second = asyncio.run(_accept_and_close_both(ledger, one, two, return_exceptions=True))
    monkeypatch.undo()
    assert isinstance(accepted, LedgerFullError)
    for turn_id, outcome in ((one, first), (two, second)):  # each run its own error and rescue file
        assert isinstance(outcome, TurnNotSavedError) and turn_id in str(outcome)
        assert outcome.rescue_path == str(tmp_path / "rescued" / f"turn-{turn_id}.json")
    assert not db.connection.in_transaction
    assert statuses(ledger, one, two) == ["streaming", "streaming"]  # nothing half-written
    assert run_inline(ledger.queue.items()) == []
    assert [m.role for m in run_inline(ledger.turns.messages(one))] == ["user"]  # no kept rows of the lost write
    assert "other-model" not in str(ledger.turns._origins.known)  # the rolled-back write found none
    assert sorted(run_inline(ledger.turns.recover(turn_ids=[one, two]))) == sorted([one, two])
    assert statuses(ledger, one, two) == ["completed", "completed"]
    history = run_inline(ledger.turns.history("s2"))
    assert [m.text for m in history if m.role == "assistant"] == ["a1", "two"]  # type: ignore[union-attr]


def test_a_write_refused_on_its_own_fails_alone(ledger: Ledger) -> None:
    one, two = opened(ledger, "s1"), opened(ledger, "s2")
    run_inline(ledger.turns.write(TurnWrite("s2", None, query_messages=[user("q")], response_messages=[reply("a")])))

    async def main() -> list[Any]:
        grouped = ledger.queue.grouped
        return await asyncio.gather(
            accept(ledger, 1),
            ledger.turns.write(closing("s1", one, "one"), via=grouped),
            ledger.turns.write(closing("s2", two, "two"), via=grouped),  # s2's head moved since it opened
            return_exceptions=True,
        )

    (_, created), first, second = asyncio.run(main())
    assert created and first == one and isinstance(second, HeadMovedError)
    assert statuses(ledger, one, two) == ["completed", "streaming"]


def test_a_cancelled_writer_resumes_only_once_its_write_committed(ledger: Ledger) -> None:
    one = opened(ledger, "s1")

    async def main() -> None:
        task = asyncio.create_task(ledger.turns.write(closing("s1", one, "one"), via=ledger.queue.grouped))
        await asyncio.sleep(0)  # the write joined the group, which commits in the next round
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert statuses(ledger, one) == ["completed"]

    asyncio.run(main())


def test_a_grouped_write_that_breaks_in_its_own_code_fails_alone(ledger: Ledger) -> None:
    """An error of the write's own code (here a body that does not encode) is that write's, as it was when the
    turn write had its own transaction: the accept of the same round still commits."""
    one = opened(ledger, "s1")
    broken = closing("s1", one, "one")
    broken.details = TurnDetails(model="m", provider="p", metadata={"unencodable": object()})

    async def main() -> list[Any]:
        grouped = ledger.queue.grouped
        return await asyncio.gather(accept(ledger, 1), ledger.turns.write(broken, via=grouped), return_exceptions=True)

    (item, created), failed = asyncio.run(main())
    assert created and isinstance(failed, TypeError)
    assert statuses(ledger, one) == ["streaming"]
    assert run_inline(ledger.queue.get(item.id)) is not None


# ------------------------------------------------------------------ a waiter cancelled while its write is grouped
# A grouped write cannot be stopped once submitted: whatever happens to the task that waits, the write commits
# once (or fails, and its caller hears why), and the task hears its cancellation only once the write is settled.


def turns_of(ledger: Ledger, session: str) -> list[str]:
    """Every turn of ``session``, closed or open (a doubled write would show as one more)."""
    rows = ledger.database.connection.execute("SELECT id FROM turns WHERE session_label = ? ORDER BY id", (session,))
    return [str(row[0]) for row in rows]


def test_a_waiter_cancelled_before_the_flush_resumes_after_the_commit_with_its_write_done_once(ledger: Ledger) -> None:
    one = opened(ledger, "s1")
    before = turns_of(ledger, "s1")
    order: list[str] = []
    ledger.database.connection.set_trace_callback(lambda sql: order.append(sql) if sql == "COMMIT" else None)

    async def main() -> asyncio.Task[str]:
        task = asyncio.create_task(ledger.turns.write(closing("s1", one, "one"), via=ledger.queue.grouped))
        task.add_done_callback(lambda _: order.append("resumed"))
        await asyncio.sleep(0)  # the write joined the group, which commits in the next round
        task.cancel()
        await asyncio.wait([task])
        return task

    task = asyncio.run(main())
    ledger.database.connection.set_trace_callback(None)
    assert task.cancelled()
    assert order == ["COMMIT", "resumed"]  # it went on waiting until the group committed
    assert statuses(ledger, one) == ["completed"] and turns_of(ledger, "s1") == before  # written, and once
    assert [m.text for m in run_inline(ledger.turns.history("s1")) if m.role == "assistant"] == ["a1", "one"]  # type: ignore[union-attr]


def test_every_waiter_of_a_group_hears_its_outcome_when_one_of_them_is_cancelled(ledger: Ledger) -> None:
    one, two, three = opened(ledger, "s1"), opened(ledger, "s2"), opened(ledger, "s3")

    async def main() -> list[Any]:
        grouped = ledger.queue.grouped
        tasks = [
            asyncio.create_task(ledger.turns.write(closing(s, t, s), via=grouped))
            for s, t in (("s1", one), ("s2", two), ("s3", three))
        ]
        await asyncio.sleep(0)
        tasks[1].cancel()
        return await asyncio.gather(accept(ledger, 1), *tasks, return_exceptions=True)

    (_, created), first, second, third = asyncio.run(main())
    assert created and (first, third) == (one, three)
    assert isinstance(second, asyncio.CancelledError)
    assert statuses(ledger, one, two, three) == ["completed"] * 3  # the cancelled waiter's write committed too


def test_a_waiter_cancelled_twice_hears_one_cancellation_once_the_write_is_settled(ledger: Ledger) -> None:
    one = opened(ledger, "s1")
    seen: list[str] = []

    async def write() -> str:
        try:
            return await ledger.turns.write(closing("s1", one, "one"), via=ledger.queue.grouped)
        except asyncio.CancelledError:
            seen.append(statuses(ledger, one)[0])
            raise

    async def main() -> asyncio.Task[str]:
        task = asyncio.create_task(write())
        await asyncio.sleep(0)
        task.cancel()  # before the group's commit
        await asyncio.sleep(0)
        task.cancel()  # after it, before the waiter resumed
        await asyncio.wait([task])
        return task

    assert asyncio.run(main()).cancelled()
    assert seen == ["completed"]  # one CancelledError, raised once the write was on disk


def test_a_timeout_around_a_grouped_write_ends_as_a_timeout_once_the_write_is_settled(ledger: Ledger) -> None:
    """The cancellation is the task's own to account for: ``asyncio.timeout`` turns it into ``TimeoutError``, and
    the task is not left marked as being cancelled."""
    one = opened(ledger, "s1")

    async def main() -> int:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):  # expires in the round the write joins its group, before the commit
                await ledger.turns.write(closing("s1", one, "one"), via=ledger.queue.grouped)
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    assert asyncio.run(main()) == 0
    assert statuses(ledger, one) == ["completed"]


def test_a_cancelled_waiter_whose_group_failed_hears_the_failure_and_its_turn_is_rescued(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write's failure outranks the cancellation: a caller told only "cancelled" would not know its turn's
    outcome is in a rescue file (the run would have nothing to say), and the rescue is written on that error."""
    one = opened(ledger, "s1")
    db: Any = ledger.database
    monkeypatch.setattr(db, "_conn", FullAtCommit(db.connection))

    async def main() -> BaseException | str:
        task = asyncio.create_task(ledger.turns.write(closing("s1", one, "one"), via=ledger.queue.grouped))
        await asyncio.sleep(0)
        task.cancel()  # before the group's (failing) commit
        return (await asyncio.gather(task, return_exceptions=True))[0]

    outcome = asyncio.run(main())
    monkeypatch.undo()
    assert isinstance(outcome, TurnNotSavedError)
    assert outcome.rescue_path == str(tmp_path / "rescued" / f"turn-{one}.json")
    assert run_inline(ledger.turns.recover(turn_ids=[one])) == [one]
    assert statuses(ledger, one) == ["completed"]  # closed from the rescue file, with the run's own outcome


def test_a_waiter_cancelled_after_its_group_failed_but_before_it_resumed_hears_the_failure(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, when the cancellation comes in the round the failed group's callers are told (the waiter not yet
    resumed): told "cancelled" only, the run's final write was lost, its turn left for recovery as ``aborted``."""
    one = opened(ledger, "s1")
    db: Any = ledger.database
    monkeypatch.setattr(db, "_conn", FullAtCommit(db.connection))

    async def main() -> BaseException | str:
        task = asyncio.create_task(ledger.turns.write(closing("s1", one, "one"), via=ledger.queue.grouped))
        await asyncio.sleep(0)  # the write joined the group: its flush is the next callback of the loop
        asyncio.get_running_loop().call_soon(task.cancel)  # right after the flush, before the waiter resumes
        return (await asyncio.gather(task, return_exceptions=True))[0]

    outcome = asyncio.run(main())
    monkeypatch.undo()
    assert isinstance(outcome, TurnNotSavedError)
    assert outcome.rescue_path == str(tmp_path / "rescued" / f"turn-{one}.json")
