"""The engine's ledger writes leave the event loop when many runs share it, and never outrun the result.

- While more than ``INLINE_MAX_RUNS`` runs are active, no ledger write (open_turn, journal
  entries, write_turn) runs on the event loop's thread: the loop keeps serving the other runs.
  The tests of the thread path lower the threshold to 1, so a few runs exercise it.
- While few runs are active, writes run inline: a hop per write cost the broker's 8 concurrent
  turns a third of their rate.
- A run reports done only once its turn is on disk — also when its task is cancelled while the
  writer thread is writing the turn (the write cannot be stopped once queued).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution import _writer
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import JournalEntry, Ledger, TurnOpen, TurnWrite
from nexus.ledger._sqlite import Database
from nexus.ledger._turn_store import SqlTurnStore
from nexus.llm.abort import AbortSignal
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call


class WatchedTurns(SqlTurnStore):
    """A real turn store that records, for every write, its thread and how many runs were active."""

    def __init__(self, db: Database) -> None:
        super().__init__(db, message_cache=0)
        self.calls: list[tuple[str, str, int]] = []
        self.turn_gate: threading.Event | None = None  # when set, write waits for it
        self.in_write_turn = threading.Event()
        self.open_gate: threading.Event | None = None  # when set, open waits for it
        self.in_open_turn = threading.Event()

    def _seen(self, name: str) -> None:
        self.calls.append((name, threading.current_thread().name, _writer._LOAD.runs))

    async def open(self, turn: TurnOpen) -> str:
        self._seen("open")
        if self.open_gate is not None:
            self.in_open_turn.set()
            self.open_gate.wait(10)
        return await super().open(turn)

    async def journal(self, entries: Sequence[JournalEntry]) -> None:
        self._seen("journal")
        await super().journal(entries)

    async def write(self, turn: TurnWrite) -> str:
        self._seen("write")
        if self.turn_gate is not None:
            self.in_write_turn.set()
            self.turn_gate.wait(10)
        return await super().write(turn)


class WatchedLedger(Ledger):
    """A real ledger whose turn store records where each write ran (:class:`WatchedTurns`)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.turns = self.watch = WatchedTurns(db)


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[WatchedLedger]:
    led = WatchedLedger(Database(tmp_path / "agents.db"))
    yield led
    led.close()


def _gated_tool(arrived: list[int], everyone: asyncio.Event, runs: int) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        arrived.append(1)
        if len(arrived) == runs:
            everyone.set()
        await everyone.wait()  # all runs are inside their tool at once: all active together
        return AgentToolResult.text("done")

    return AgentTool("gate", "waits for the other runs", {"type": "object", "properties": {}}, execute)


def _env(ledger: Ledger, model: ScriptedModel, tools: list[AgentTool]) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=model.stream, cooldowns=ProfileCooldowns(), tools=tools)


@pytest.fixture
def many_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two active runs count as many: the thread path with a handful of runs."""
    monkeypatch.setattr(_writer, "INLINE_MAX_RUNS", 1)


async def _four_gated_runs(watched: WatchedLedger) -> None:
    runs = 4
    arrived: list[int] = []
    everyone = asyncio.Event()
    executions = []
    for i in range(runs):
        model = ScriptedModel([tool_call("gate", {}, id=f"c{i}"), text(f"answer {i}")], record=False)
        env = _env(watched, model, [_gated_tool(arrived, everyone, runs)])
        executions.append(env.start(AgentSpec(model=model.model), f"s{i}", "go"))
    results = await asyncio.gather(*(e.result for e in executions))
    assert [r.stop_reason for r in results] == ["end_turn"] * runs
    for i, result in enumerate(results):  # and every turn is on disk, in order
        head = await watched.sessions.head(f"s{i}")
        assert head is not None and head.id == result.turn_id and head.status == "completed"


async def test_writes_leave_the_loop_thread_while_many_runs_share_it(watched: WatchedLedger, many_runs: None) -> None:
    await _four_gated_runs(watched)
    loop_thread = threading.current_thread().name
    shared = [(name, thread) for name, thread, active in watched.watch.calls if active > 1]
    assert {name for name, _ in shared} >= {"open", "journal", "write"}
    assert all(thread != loop_thread for _, thread in shared), shared
    assert all(thread.startswith("nexus-ledger-writer") for _, thread in shared), shared


async def test_a_few_runs_write_inline(watched: WatchedLedger) -> None:
    """Four runs at once (the broker runs eight by default) write on the loop's thread: no hops."""
    assert _writer.INLINE_MAX_RUNS >= 4
    await _four_gated_runs(watched)
    loop_thread = threading.current_thread().name
    shared = [(name, thread) for name, thread, active in watched.watch.calls if active > 1]
    assert {name for name, _ in shared} >= {"open", "journal", "write"}
    assert all(thread == loop_thread for _, thread in shared), shared


async def test_a_run_cancelled_during_its_turn_write_ends_after_the_write(
    watched: WatchedLedger, many_runs: None
) -> None:
    release_other = asyncio.Event()
    other_model = ScriptedModel([tool_call("hold", {}, id="h1"), text("later")], record=False)

    async def hold(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        await release_other.wait()
        return AgentToolResult.text("released")

    other_env = _env(watched, other_model, [AgentTool("hold", "holds", {"type": "object", "properties": {}}, hold)])
    other = other_env.start(AgentSpec(model=other_model.model), "other", "wait")
    model = ScriptedModel([text("short answer")], record=False)
    env = _env(watched, model, [])
    watched.watch.turn_gate = threading.Event()
    execution = env.start(AgentSpec(model=model.model), "main", "hi")
    assert await asyncio.to_thread(watched.watch.in_write_turn.wait, 10)  # the writer thread is inside write_turn
    execution.result.cancel()
    await asyncio.sleep(0.05)
    assert not execution.result.done()  # still waiting for the write it handed to the thread
    watched.watch.turn_gate.set()
    with pytest.raises(asyncio.CancelledError):
        await execution.result
    head = await watched.sessions.head("main")
    assert head is not None and head.id == execution.turn_id and head.status == "completed"
    watched.watch.turn_gate = None
    release_other.set()
    assert (await other.result).stop_reason == "end_turn"


async def test_a_run_cancelled_while_its_turn_opens_closes_that_turn(watched: WatchedLedger, many_runs: None) -> None:
    """The open cannot be stopped once queued: the turn it opened is written ``aborted``, not left open."""
    release_other = asyncio.Event()
    other_model = ScriptedModel([tool_call("hold", {}, id="h1"), text("later")], record=False)

    async def hold(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        await release_other.wait()
        return AgentToolResult.text("released")

    other_env = _env(watched, other_model, [AgentTool("hold", "holds", {"type": "object", "properties": {}}, hold)])
    other = other_env.start(AgentSpec(model=other_model.model), "other", "wait")
    while other.state != "tools":  # the other run is active: this run's writes go to the thread
        await other.wait_state_change()
    model = ScriptedModel([text("never streamed")], record=False)
    env = _env(watched, model, [])
    watched.watch.open_gate = threading.Event()
    execution = env.start(AgentSpec(model=model.model), "main", "hi")
    assert await asyncio.to_thread(watched.watch.in_open_turn.wait, 10)
    execution.result.cancel()
    watched.watch.open_gate.set()
    with pytest.raises(asyncio.CancelledError):
        await execution.result
    watched.watch.open_gate = None
    turn_id = execution.turn_id
    assert turn_id is not None
    turn = await watched.turns.get(turn_id)
    assert turn is not None and turn.status == "aborted"  # closed, not left open for recover()
    assert execution.state == "done"
    release_other.set()
    assert (await other.result).stop_reason == "end_turn"


async def test_writes_finished_together_wake_their_runs_a_batch_per_loop_round() -> None:
    """Hundreds of runs in step finish their writes together: the loop must not resume all of them in one round.

    The writes finish while the loop is blocked (as when it is busy with other runs); then at most
    ``RESUMES_PER_ROUND`` awaiters resume per round of the loop, in the order the writes finished, and
    a write's exception still reaches its awaiter."""
    writes = 3 * _writer.RESUMES_PER_ROUND + 5
    gate, finished = threading.Event(), threading.Semaphore(0)

    def write(i: int) -> int:
        gate.wait(10)
        finished.release()
        if i == writes - 1:
            raise ValueError("the last write fails")
        return i

    futures = [_writer.submit(lambda i=i: write(i)) for i in range(writes)]
    rounds = [0]
    resumed: list[tuple[int, int]] = []  # (round, write)

    def count_rounds() -> None:
        rounds[0] += 1
        if len(resumed) < writes:
            asyncio.get_running_loop().call_soon(count_rounds)

    async def wait(i: int) -> None:
        try:
            await futures[i]
        except ValueError:
            pass
        resumed.append((rounds[0], i))

    waiters = [asyncio.create_task(wait(i)) for i in range(writes)]
    await asyncio.sleep(0)  # every waiter awaits its write
    gate.set()
    for _ in range(writes):  # the loop is blocked until the thread has finished every write
        assert finished.acquire(timeout=10)
    count_rounds()
    await asyncio.gather(*waiters)
    assert [i for _, i in resumed] == list(range(writes))
    per_round: dict[int, int] = {}
    for round_, _ in resumed:
        per_round[round_] = per_round.get(round_, 0) + 1
    assert max(per_round.values()) <= _writer.RESUMES_PER_ROUND, per_round
    with pytest.raises(ValueError, match="the last write fails"):
        futures[-1].result()


def test_a_closed_loop_is_not_kept_for_its_writes() -> None:
    """The hand-over of finished writes is per loop and must not keep a finished loop (a process runs many)."""
    import gc
    import weakref

    async def one_write() -> int:
        return await _writer.submit(lambda: 7)

    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(one_write()) == 7
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None, "the writer's hand-over kept a closed loop alive"
