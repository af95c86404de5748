"""A broker's turn whose final write fails (a full disk): its rescued outcome answers the message, once.

The turn's outcome goes to a rescue file and the turn is put in the ledger from it later, consuming the
queue items it answered in that transaction. The broker used to fail the batch's messages when the disk
had room again for that small write (the message ``failed`` though its turn completed), and when it had
not, to run the batch again: the retry's run put the rescued turn in the ledger, consuming the messages,
and then ran them a second time on top of it (one message in two completed turns, the outside trial's
``nexus serve`` on a 6 MB tmpfs, 2 of 2 times). The full disk is simulated at ``COMMIT`` (as SQLite's
``SQLITE_FULL`` surfaces there), turned on once the run's model is called, so the turn is open by then;
the last test fills a real tmpfs instead.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings, _scheduler
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession, TurnDetails, TurnOpen, _rescue
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.records import AcceptRequest
from nexus.testing import ScriptedModel
from nexus.testing.conformance.support import reply, user
from nexus.testing.steps import text


class Disk:
    """Whether the simulated disk is full: every commit fails while it is."""

    def __init__(self) -> None:
        self.full = False
        self.model_calls = 0


class FullAtCommit:
    """The ledger's connection, whose ``COMMIT`` fails as SQLite's does on a full disk while ``disk.full``."""

    def __init__(self, conn: sqlite3.Connection, disk: Disk) -> None:
        self.conn, self.disk = conn, disk
        self.writing = False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "BEGIN IMMEDIATE":
            self.writing = True
        elif sql == "COMMIT" and self.writing:
            self.writing = False
            if self.disk.full:  # a write finds no room (reads still work); SQLite rolls the transaction back
                self.conn.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


async def _broker(ledger: Ledger, disk: Disk, monkeypatch: pytest.MonkeyPatch) -> AgentBroker:
    """A broker on the real engine whose disk fills as the model is first called."""
    scripted = ScriptedModel([text("the answer"), text("the second answer")])

    def stream(*args: Any, **kwargs: Any) -> Any:
        disk.model_calls += 1
        disk.full = disk.model_calls == 1 or disk.full  # the turn is open: its final write finds no room
        return scripted.stream(*args, **kwargs)

    db: Any = ledger.database
    monkeypatch.setattr(db, "_conn", FullAtCommit(db.connection, disk))
    monkeypatch.setattr(_scheduler, "RETRY_AFTER_S", 0.01)
    runtime = Runtime(load_config(), ledger, stream_fn=stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(ledger, runtime, BrokerSettings(queue=QueueSettings(mode="followup")))
    await broker.start()
    await ledger.sessions.ensure(NewSession("agent:coder"))
    broker.register_agent(AgentIdentity("coder", "agent:coder", "worker"), spec=AgentSpec(model=scripted.model.ref))
    return broker


async def _completed(ledger: Ledger) -> list[str]:
    """The session's completed turns (all of its tree: a second run would be a child of the rescued turn)."""
    turns, _ = await ledger.turns.tree("agent:coder")
    return [turn.id for turn in turns if turn.status == "completed"]


async def test_a_rescued_turn_consumes_its_message_which_is_not_run_again(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk()
    failed = _scheduler.FailureNotices.failed

    def room_after_a_failed_batch(self: Any, agent_id: str, label: str, exc: Exception) -> None:
        failed(self, agent_id, label, exc)
        disk.full = False  # the batch could not be settled on the full disk; then room is made

    monkeypatch.setattr(_scheduler.FailureNotices, "failed", room_after_a_failed_batch)
    broker = await _broker(ledger, disk, monkeypatch)
    try:
        result = await broker.send_and_wait(AgentMessage("m-1", "user", "coder", "question"), timeout_ms=20_000)
        assert await broker.wait_for_idle("coder", timeout_ms=5_000)
    finally:
        await broker.close()
    (turn_id,) = await _completed(ledger)  # one completed turn, the rescued one
    assert disk.model_calls == 1  # the message was not run again
    assert (result.success, result.reply, result.turn_id) == (True, "the answer", turn_id)
    (item,) = BrokerStore(ledger.database).items(agent_id="coder")
    assert (item.status, item.turn_id) == ("delivered", turn_id)
    assert not list((Path(ledger.path).parent / "rescued").glob("*.json"))  # put in the ledger, file gone


async def test_a_rescued_turn_whose_batch_could_be_settled_still_delivers_its_message(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = Disk()
    save = _rescue.save

    def room_once_rescued(database: str, turn: _rescue.RescuedTurn) -> Path | None:
        path = save(database, turn)
        disk.full = False  # room is made right after the rescue file is written: the batch can be settled
        return path

    monkeypatch.setattr(_rescue, "save", room_once_rescued)
    broker = await _broker(ledger, disk, monkeypatch)
    try:
        first = await broker.send_and_wait(AgentMessage("m-1", "user", "coder", "question"), timeout_ms=20_000)
        second = await broker.send_and_wait(AgentMessage("m-2", "user", "coder", "another"), timeout_ms=20_000)
        assert await broker.wait_for_idle("coder", timeout_ms=5_000)
    finally:
        await broker.close()
    rescued, answered = await _completed(ledger)
    assert disk.model_calls == 2  # each message ran once
    assert (first.success, first.reply, first.turn_id) == (True, "the answer", rescued)
    assert (second.success, second.reply, second.turn_id) == (True, "the second answer", answered)
    items = {item.message_id: (item.status, item.turn_id) for item in BrokerStore(ledger.database).items()}
    assert items == {"m-1": ("delivered", rescued), "m-2": ("delivered", answered)}


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem has not one byte left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                continue
    finally:
        os.close(fd)


async def test_on_a_real_full_disk_the_rescued_turn_answers_its_message_once(
    tmpfs: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = tmpfs("4m")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the rescue file's second place, off the full disk
    monkeypatch.setattr(_scheduler, "RETRY_AFTER_S", 0.01)
    filler = disk / "filler"
    failed = _scheduler.FailureNotices.failed

    def room_after_a_failed_batch(self: Any, agent_id: str, label: str, exc: Exception) -> None:
        failed(self, agent_id, label, exc)
        filler.unlink(missing_ok=True)

    monkeypatch.setattr(_scheduler.FailureNotices, "failed", room_after_a_failed_batch)
    reply = " ".join(f"w{n}" for n in range(14_000))  # ~87 kB, as the trial's message
    scripted = ScriptedModel([text(reply), text("again")])
    calls: list[int] = []

    def stream(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            _fill(filler)  # the turn is open: its final write finds no room
        return scripted.stream(*args, **kwargs)

    with Ledger.open(disk / "agents.db") as ledger:
        runtime = Runtime(load_config(), ledger, stream_fn=stream, cooldowns=ProfileCooldowns())
        broker = AgentBroker(ledger, runtime, BrokerSettings(queue=QueueSettings(mode="followup")))
        await broker.start()
        await ledger.sessions.ensure(NewSession("agent:coder"))
        broker.register_agent(AgentIdentity("coder", "agent:coder", "worker"), spec=AgentSpec(model=scripted.model.ref))
        try:
            result = await broker.send_and_wait(AgentMessage("m-1", "user", "coder", reply), timeout_ms=30_000)
            assert await broker.wait_for_idle("coder", timeout_ms=5_000)
        finally:
            await broker.close()
        (turn_id,) = await _completed(ledger)
        assert len(calls) == 1
        assert (result.success, result.reply, result.turn_id) == (True, reply, turn_id)
        (item,) = BrokerStore(ledger.database).items(agent_id="coder")
        assert (item.status, item.turn_id) == ("delivered", turn_id)
        assert ledger.database.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.fixture(params=["sqlite", "postgres"])
async def any_ledger(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Ledger]:
    """A fresh ledger on each backend (PostgreSQL: skipped without a server unless required)."""
    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")  # its server first
    monkeypatch.chdir(tmp_path)  # a PostgreSQL ledger's first rescue place is relative to its URL
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    opened = Ledger.open(tmp_path / "agents.db") if url is None else await Ledger.connect(url)
    yield opened
    await opened.aclose()


async def test_a_run_whose_messages_a_recovered_turn_answered_returns_that_turn(any_ledger: Ledger) -> None:
    from nexus.engine.wiring._start import StartRequest, answered_before_start

    ledger = any_ledger
    await ledger.sessions.ensure(NewSession("agent:coder"))
    ids = []
    for n in (1, 2):
        request = AcceptRequest("coder", "agent:coder", f"m-{n}", "user", {"content": f"q{n}"}, "followup")
        ids.append((await ledger.queue.accept(request))[0].id)
    await ledger.queue.claim(ids)
    turn_id = await ledger.turns.open(TurnOpen("agent:coder", [user("q1")], TurnDetails(model="m", provider="p")))
    saved = _rescue.RescuedTurn(turn_id, "agent:coder", "completed", [reply("a1")], "end_turn", None, (ids[0],))
    assert _rescue.save(ledger.path, saved) is not None  # its final write failed: the outcome is in a rescue file

    def start(*consumes: str) -> StartRequest:
        return StartRequest("q", consumes, None, (), (), None)

    assert await answered_before_start(ledger, start(ids[0])) is None  # not in the ledger yet: it would run
    assert await ledger.turns.recover(turn_ids=[turn_id]) == [turn_id]  # as a run's lock does: consumes m-1
    items = {item.message_id: (item.status, item.turn_id) for item in await ledger.queue.items()}
    assert items == {"m-1": ("delivered", turn_id), "m-2": ("processing", None)}
    result = await answered_before_start(ledger, start(ids[0]))  # all answered by one turn: its result
    assert result is not None
    assert (result.turn_id, result.status, result.reply, result.error) == (turn_id, "completed", "a1", None)
    assert await answered_before_start(ledger, start(ids[1])) is None  # none answered: it runs
    partly = await answered_before_start(ledger, start(*ids))  # one answered: nothing runs, nothing is stored
    assert partly is not None and (partly.turn_id, partly.status) == (None, "aborted")


async def test_the_batch_is_read_in_one_go_however_many_messages_it_holds(
    any_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of 30 collected messages after a recovery: one read of the queue, not 30 (one per item)."""
    from nexus.engine.wiring._start import StartRequest, answered_before_start

    ledger = any_ledger
    await ledger.sessions.ensure(NewSession("agent:coder"))
    ids = []
    for n in range(30):
        request = AcceptRequest("coder", "agent:coder", f"m-{n}", "user", {"content": f"q{n}"}, "collect")
        ids.append((await ledger.queue.accept(request))[0].id)
    await ledger.queue.claim(ids)
    database = ledger.queue._db  # type: ignore[attr-defined]
    reads = 0
    real_read = database.run_read

    async def counted(fn: Callable[[Any], Any]) -> Any:
        nonlocal reads
        reads += 1
        return await real_read(fn)

    monkeypatch.setattr(database, "run_read", counted)
    assert await answered_before_start(ledger, StartRequest("q", tuple(ids), None, (), (), None)) is None
    assert reads == 1
