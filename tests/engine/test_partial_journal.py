"""The streamed reply is journaled while it streams (throttled, off the loop), so a crash keeps it.

In-process runs with a real SQLite ledger: what the journal holds at each point, that the
final ``write_turn`` replaces it, that the order of replies, steering messages and tool
calls survives ``recover()``, and that a failing journal never breaks a run. The SIGKILL
tests with a real child process are in ``test_execute_crash.py``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import until

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution._journal import TurnJournal, snapshot
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import JournalEntry, JournalReply, Ledger, LedgerBusyError, NewSession, TurnDetails, TurnOpen
from nexus.ledger._sql_db import run_inline
from nexus.ledger._sqlite import Database
from nexus.ledger._turn_store import SqlTurnStore
from nexus.ledger._turns import MID_REPLY_NOTE
from nexus.llm.abort import AbortSignal
from nexus.llm.events import (
    AssistantMessageEvent,
    DoneEvent,
    StartEvent,
    TextDeltaEvent,
    TextStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantMessage, Context, Model, TextContent, ToolCall, ToolResultMessage, UserMessage

MODEL = Model(id="gated", provider="test", api="test-gated")


class RecordingTurns(SqlTurnStore):
    """A real turn store that remembers every reply journaled as (slot, text, complete, tool call ids)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db, message_cache=0)
        self.partials: list[tuple[int, str, bool, list[str]]] = []  # appended from the journal's worker thread

    async def journal(self, entries: Sequence[JournalEntry]) -> None:
        await super().journal(entries)  # one entry, or the writer thread's batch of snapshots (one transaction)
        replies = [e for e in entries if isinstance(e, JournalReply)]
        self.partials.extend(
            (e.slot, e.message.text, e.complete, [c.id for c in e.message.tool_calls]) for e in replies
        )


class RecordingLedger(Ledger):
    """A real ledger whose turn store is a :class:`RecordingTurns`."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.turns = self.recorded = RecordingTurns(db)

    @property
    def partials(self) -> list[tuple[int, str, bool, list[str]]]:
        return self.recorded.partials


class FailingTurns(SqlTurnStore):
    """Every journal write fails as if another process held the database."""

    async def journal(self, entries: Sequence[JournalEntry]) -> None:
        raise LedgerBusyError("agents.db stayed locked (test)")


class FailingLedger(Ledger):
    """A real ledger whose crash journal cannot be written (:class:`FailingTurns`)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.turns = FailingTurns(db, message_cache=0)


@pytest.fixture
def recording(tmp_path: Path) -> Iterator[RecordingLedger]:
    led = RecordingLedger(Database(tmp_path / "agents.db"))
    yield led
    led.close()


class GatedModel:
    """A stream function: each call streams its pieces of text; ``gate`` (if set) holds the rest back."""

    def __init__(
        self, *replies: tuple[list[str], list[str]], tool_first: str | None = None, delay: float = 0.0
    ) -> None:
        self.replies = list(replies)
        self.delay = delay
        self.tool_first = tool_first
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(message)
        if self.tool_first is not None and not isinstance(context.messages[-1], ToolResultMessage):
            call = ToolCall("c1", self.tool_first, {})
            message.content.append(call)
            yield ToolCallStartEvent(0, message)
            yield ToolCallEndEvent(0, call, message)
            message.stop_reason = "tool_use"
            yield DoneEvent("tool_use", message)
            return
        before, after = self.replies.pop(0)
        block = TextContent("")
        message.content.append(block)
        yield TextStartEvent(len(message.content) - 1, message)
        for i, piece in enumerate([*before, None, *after]):
            if piece is None:
                if after:
                    self.waiting.set()
                    await self.gate.wait()
                continue
            block.text += piece
            yield TextDeltaEvent(len(message.content) - 1, piece, message)
            if self.delay or i % 8 == 0:
                await asyncio.sleep(self.delay)  # let the journal's worker report back, as network reads do
        yield DoneEvent("stop", message)


def _env(ledger: Ledger, model: GatedModel, tools: list[AgentTool] | None = None) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=model.stream, cooldowns=ProfileCooldowns(), tools=tools)


def _journal_rows(ledger: Ledger) -> int:
    return int(ledger.database.connection.execute("SELECT COUNT(*) FROM turn_journal").fetchone()[0])


async def test_long_reply_is_journaled_in_few_growing_snapshots_then_replaced(
    recording: RecordingLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("nexus.engine.execution._journal.PARTIAL_INTERVAL_S", 60.0)  # only the 2 KB rule applies here
    pieces = [f"{i:04d}:" + "x" * 45 for i in range(200)]  # 10,000 characters in 200 deltas
    model = GatedModel((pieces, []), delay=0.002)
    env = _env(recording, model)
    result = await env.start(AgentSpec(model=MODEL), "main", "write a lot").result
    full = "".join(pieces)
    assert result.stop_reason == "end_turn" and result.messages[-1].text == full
    streaming = [p for p in recording.partials if not p[2]]
    assert 1 <= len(streaming) <= 10_000 // 2048  # throttled: one per 2 KB at most, not one per delta
    assert all(text and full.startswith(text) and slot == 0 for slot, text, _, _ in streaming)
    assert [len(p[1]) for p in streaming] == sorted(len(p[1]) for p in streaming)
    assert len(streaming[0][1]) >= 2048  # the first one waited for 2 KB of new text
    assert not any(p[2] for p in recording.partials)  # the ended reply went straight into write_turn
    assert [m.role for m in await recording.turns.history("main")] == ["user", "assistant"]  # not twice
    assert _journal_rows(recording) == 0


async def test_text_that_stops_streaming_is_journaled_after_the_interval(recording: RecordingLedger) -> None:
    model = GatedModel((["Hello, ", "wor"], ["ld!"]))
    env = _env(recording, model)
    execution = env.start(AgentSpec(model=MODEL), "main", "greet")
    await asyncio.wait_for(model.waiting.wait(), 10)
    await until(lambda: recording.partials, "the snapshot")  # no new delta came: the timer wrote it
    assert recording.partials == [(0, "Hello, wor", False, [])]
    assert (await recording.turns.open_turns())[0].id == execution.turn_id
    model.gate.set()
    result = await execution.result
    assert result.messages[-1].text == "Hello, world!"
    assert recording.partials == [(0, "Hello, wor", False, [])]  # the turn was written right after
    assert [getattr(m, "text", None) for m in await recording.turns.history("main")] == [None, "Hello, world!"]
    assert _journal_rows(recording) == 0


async def test_snapshot_of_a_reply_carries_only_its_complete_tool_calls(recording: RecordingLedger) -> None:
    async def stream(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(message)
        message.content.append(TextContent("I will read both."))
        yield TextStartEvent(0, message)
        yield TextDeltaEvent(0, "I will read both.", message)
        first = ToolCall("c1", "read", {"path": "a.txt"})
        message.content.append(first)
        yield ToolCallStartEvent(1, message)
        yield ToolCallEndEvent(1, first, message)
        message.content.append(ToolCall("c2", "read", {}))
        yield ToolCallStartEvent(2, message)
        yield ToolCallDeltaEvent(2, '{"pa', message)
        assert options is not None and options.signal is not None
        await options.signal.wait()  # the model stalls inside c2's arguments until the run is aborted

    model = GatedModel()
    env = _env(recording, model)
    env.stream_fn = stream
    execution = env.start(AgentSpec(model=MODEL), "main", "read a and b")
    await until(lambda: recording.partials, "the snapshot")
    assert recording.partials == [(0, "I will read both.", False, ["c1"])]  # c2 is not complete: left out
    execution.abort("test over")
    result = await execution.result
    assert result.stop_reason == "aborted"
    assert recording.partials[-1] == (0, "I will read both.", True, ["c1"])  # the cut reply, without c2


async def test_short_reply_costs_no_journal_write(recording: RecordingLedger) -> None:
    model = GatedModel((["quick answer"], []))
    env = _env(recording, model)
    result = await env.start(AgentSpec(model=MODEL), "main", "hi").result
    assert result.messages[-1].text == "quick answer"
    assert recording.partials == []  # write_turn came right after: nothing journaled for it
    assert [m.role for m in await recording.turns.history("main")] == ["user", "assistant"]


async def test_journal_failures_are_logged_and_the_run_completes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def noop(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        return AgentToolResult.text("did nothing")

    tool = AgentTool("noop", "does nothing", {"type": "object", "properties": {}}, noop)
    model = GatedModel(([f"{i:03d} " + "y" * 60 for i in range(100)], []), tool_first="noop")
    with FailingLedger(Database(tmp_path / "agents.db")) as ledger, caplog.at_level(logging.DEBUG, "nexus.engine"):
        env = _env(ledger, model, tools=[tool])
        result = await env.start(AgentSpec(model=MODEL), "main", "go").result
        assert result.stop_reason == "end_turn" and result.error is None
        head = await ledger.sessions.head("main")
        assert head is not None and head.status == "completed" and head.tool_call_count == 1
        assert [m.role for m in await ledger.turns.history("main")] == ["user", "assistant", "tool_result", "assistant"]
    records = [r for r in caplog.records if r.name == "nexus.engine"]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    # one line for the run (issue 8 item 3: a full disk printed a traceback per failed write), no traceback
    assert len(warnings) == 1 and warnings[0].exc_info is None, [r.getMessage() for r in warnings]
    assert "could not write the crash journal" in warnings[0].getMessage()
    assert "the run goes on" in warnings[0].getMessage()
    failures = [r.getMessage() for r in records if r.levelno == logging.DEBUG]
    assert any("journal_partial failed" in m for m in failures)
    assert any("journal_tool_call failed" in m for m in failures)


# --------------------------------------------------------------------------- TurnJournal on its own


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[Ledger, str]]:
    with Ledger.open(tmp_path / "agents.db") as led:
        run_inline(led.sessions.create(NewSession("s")))
        yield led, run_inline(led.turns.open(TurnOpen("s", [UserMessage("q")], TurnDetails(model="m", provider="p"))))


def _message(text: str = "") -> AssistantMessage:
    return AssistantMessage([TextContent(text)], api="a", provider="p", model="m")


async def test_snapshot_keeps_only_complete_tool_calls(opened: tuple[Ledger, str]) -> None:
    ledger, turn = opened
    journal = TurnJournal(ledger, turn, interval_s=0.01, chunk_chars=10**9)
    live = _message("reading two files")
    done, half = ToolCall("c1", "read", {"path": "a"}), ToolCall("c2", "read", {})
    live.content += [done, half]
    journal.start(live)
    journal.grew(len("reading two files"))
    journal.call_done(1, "c1")  # c2's arguments are still streaming
    await until(lambda: 0 in journal.written, "the snapshot")
    assert snapshot(live, journal.complete_calls).content == [TextContent("reading two files"), done]
    await ledger.turns.recover(force=True)  # as after a kill -9 here
    cut = (await ledger.turns.history("s"))[-1]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted" and cut.error_message == MID_REPLY_NOTE
    assert cut.text == "reading two files" and [c.id for c in cut.tool_calls] == ["c1"]


async def test_held_back_reply_is_written_before_what_follows_it(opened: tuple[Ledger, str]) -> None:
    ledger, turn = opened
    journal = TurnJournal(ledger, turn, interval_s=0.01, chunk_chars=10**9)
    first = _message("short answer")
    journal.start(first)
    journal.grew(len("short answer"))
    journal.end(first)  # ended before its first snapshot: held back, nothing written yet
    assert journal.written == ()
    journal.message(UserMessage("steer: more detail"))  # something follows: the reply goes first
    second = _message("")
    journal.start(second)
    second.content[0] = TextContent("more det")
    journal.grew(len("more det"))
    await until(lambda: 1 in journal.written, "the second reply's snapshot")
    stale = snapshot(second, ())
    asked = AssistantMessage(
        [TextContent("more detail."), ToolCall("c9", "read", {})],
        api="a",
        provider="p",
        model="m",
        stop_reason="tool_use",
    )
    journal.end(asked)  # a tool-calling reply is written at once, into the slot its snapshot opened
    journal.write_snapshot(1, stale)  # a snapshot that was queued before the end is void
    third = _message("the file s")
    journal.start(third)
    journal.grew(len("the file s"))
    await until(lambda: 2 in journal.written, "the third reply's snapshot")
    journal.end(replace_text(third, "the file says hi"))  # held back: write_turn would come next
    journal.close()
    journal.write_final(3, _message("after close"))  # nothing is written once the run writes its turn
    await ledger.turns.recover(force=True)  # as if the process died before write_turn
    history = await ledger.turns.history("s")
    assert [(m.role, getattr(m, "stop_reason", None)) for m in history] == [
        ("user", None),
        ("assistant", "stop"),
        ("user", None),
        ("assistant", "tool_use"),
        ("assistant", "aborted"),  # its last snapshot: at most interval_s behind
    ]
    assert history[3] == asked
    assert [getattr(m, "text", None) for m in history[1::2]] == ["short answer", "more detail."]
    assert isinstance(history[4], AssistantMessage) and history[4].text == "the file s"


def replace_text(message: AssistantMessage, text: str) -> AssistantMessage:
    """The message with ``text`` as its only block (a new object, like the loop's final message)."""
    return AssistantMessage([TextContent(text)], api=message.api, provider=message.provider, model=message.model)


def test_recording_ledger_sees_the_file(tmp_path: Path) -> None:
    """The test doubles above are real ledgers on a real file (guards the helpers themselves)."""
    with RecordingLedger(Database(tmp_path / "agents.db")) as led:
        run_inline(led.sessions.create(NewSession("s")))
        turn = run_inline(led.turns.open(TurnOpen("s", [UserMessage("q")], TurnDetails())))
        run_inline(led.turns.journal([JournalReply(turn, 0, _message("x"))]))
        assert led.partials == [(0, "x", False, [])]
    with sqlite3.connect(tmp_path / "agents.db") as conn:
        assert conn.execute("SELECT kind, slot FROM turn_journal").fetchall() == [("partial", 0)]
