"""Tool execution inside the loop: ordering, sequential mode, failures as results, hooks, abort."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nexus.agent import (
    AfterToolCallContext,
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    MessageEndEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    agent_loop,
    tool,
)
from nexus.agent.tool_types import ToolUpdateFn
from nexus.llm.abort import AbortSignal
from nexus.llm.types import AssistantMessage, ToolResultMessage, UserMessage

from .canned import MODEL, Canned, call, text, types


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [ev async for ev in events]


def results(ctx: AgentContext) -> list[ToolResultMessage]:
    return [m for m in ctx.messages if isinstance(m, ToolResultMessage)]


class Recorder:
    """Tools whose finishing order the test controls with events; records start/finish order."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    def make(self, name: str, sequential: bool = False) -> AgentTool:
        gate = self.gates.setdefault(name, asyncio.Event())

        async def execute(
            call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
        ) -> AgentToolResult:
            self.log.append(f"start {name}")
            on_update(AgentToolResult.text(f"{name} working"))
            await asyncio.sleep(0)  # let other calls of the batch start if they may
            await gate.wait()
            self.log.append(f"end {name}")
            return AgentToolResult.text(f"{name} done")

        return AgentTool(name, f"tool {name}", {"type": "object"}, execute, sequential=sequential)


async def test_parallel_results_in_source_order_when_second_finishes_first() -> None:
    rec = Recorder()
    slow, fast = rec.make("slow"), rec.make("fast")
    canned = Canned([[call("slow"), call("fast")], text("done")])
    ctx = AgentContext(tools=[slow, fast])
    events: list[AgentEvent] = []

    async def run() -> None:
        async for ev in agent_loop(UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream)):
            events.append(ev)

    task = asyncio.create_task(run())
    while rec.log.count("start slow") + rec.log.count("start fast") < 2:  # noqa: ASYNC110
        await asyncio.sleep(0)
    rec.gates["fast"].set()  # the 2nd call finishes first
    while "end fast" not in rec.log:  # noqa: ASYNC110
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    assert not any(isinstance(e, ToolExecutionEndEvent) for e in events)  # held back until slow is done
    rec.gates["slow"].set()
    await task
    assert rec.log[:2] == ["start slow", "start fast"]  # both ran concurrently
    assert rec.log.index("end fast") < rec.log.index("end slow")
    tool_events = [t for t in types(events) if t.startswith(("tool_execution", "message_start:tool"))]
    assert tool_events == [
        "tool_execution_start:call_slow",
        "tool_execution_start:call_fast",
        "tool_execution_update:call_slow",
        "tool_execution_update:call_fast",
        "tool_execution_end:call_slow",
        "message_start:tool_result",
        "tool_execution_end:call_fast",
        "message_start:tool_result",
    ]
    assert [r.tool_call_id for r in results(ctx)] == ["call_slow", "call_fast"]
    updates = [e for e in events if isinstance(e, ToolExecutionUpdateEvent)]
    assert updates[0].partial_result.content[0].text == "slow working"  # type: ignore[union-attr]


async def test_sequential_mode_runs_one_call_at_a_time() -> None:
    rec = Recorder()
    a, b = rec.make("a"), rec.make("b")
    for g in rec.gates.values():
        g.set()
    canned = Canned([[call("a"), call("b")], text("done")])
    ctx = AgentContext(tools=[a, b])
    events = await collect(
        agent_loop(UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream, tool_execution="sequential"))
    )
    assert rec.log == ["start a", "end a", "start b", "end b"]
    # control: the same batch in parallel mode overlaps
    rec.log.clear()
    await collect(
        agent_loop(
            UserMessage("go"),
            AgentContext(tools=[a, b]),
            AgentLoopConfig(MODEL, stream_fn=Canned([[call("a"), call("b")], text("x")]).stream),
        )
    )
    assert rec.log == ["start a", "start b", "end a", "end b"]
    seq = [t for t in types(events) if t.startswith("tool_execution_start") or t.startswith("tool_execution_end")]
    assert seq == [
        "tool_execution_start:call_a",
        "tool_execution_end:call_a",
        "tool_execution_start:call_b",
        "tool_execution_end:call_b",
    ]


async def test_sequential_tool_never_overlaps_other_calls() -> None:
    rec = Recorder()
    p1, s, p2 = rec.make("p1"), rec.make("s", sequential=True), rec.make("p2")
    for g in rec.gates.values():
        g.set()
    canned = Canned([[call("p1"), call("s"), call("p2")], text("done")])
    ctx = AgentContext(tools=[p1, s, p2])
    await collect(agent_loop(UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream)))
    assert rec.log == ["start p1", "end p1", "start s", "end s", "start p2", "end p2"]
    assert [r.tool_call_id for r in results(ctx)] == ["call_p1", "call_s", "call_p2"]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_failures_become_error_results_and_the_loop_continues() -> None:
    @tool
    async def explode(path: str) -> str:
        """Always fails."""
        raise FileNotFoundError(f"no such file: {path}")

    def block(ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult | None:
        if ctx.tool_call.name == "add" and ctx.args["a"] == 13:
            return BeforeToolCallResult(block=True, reason="13 is not allowed here")
        return None

    calls = [
        call("nope", {}, id="c1"),
        call("add", {"a": "x", "b": 2}, id="c2"),
        call("add", {}, id="c3", raw="{'a': 1, b: 2"),
        call("explode", {"path": "/x"}, id="c4"),
        call("add", {"a": 13, "b": 1}, id="c5"),
        call("add", {"a": "2", "b": 3}, id="c6"),
    ]
    canned = Canned([calls, text("recovered")])
    ctx = AgentContext(tools=[add, explode])
    events = await collect(
        agent_loop(UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream, before_tool_call=block))
    )
    rs = {r.tool_call_id: r for r in results(ctx)}
    assert [r.tool_call_id for r in results(ctx)] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert rs["c1"].is_error and rs["c1"].text == 'Tool "nope" not found. Available tools: add, explode.'
    assert rs["c2"].is_error and rs["c2"].text.startswith('Validation failed for tool "add":\n  - a: ')
    assert "Received arguments:" in rs["c2"].text and '"x"' in rs["c2"].text
    assert rs["c3"].is_error and "not valid JSON" in rs["c3"].text and "{'a': 1, b: 2" in rs["c3"].text
    assert rs["c4"].is_error and rs["c4"].text == "no such file: /x"
    assert rs["c5"].is_error and rs["c5"].text == "13 is not allowed here"
    assert not rs["c6"].is_error and rs["c6"].text == "5"  # "2" coerced to 2
    ends = [e for e in events if isinstance(e, ToolExecutionEndEvent)]
    assert [e.is_error for e in ends] == [True, True, True, True, True, False]
    # the model saw every result and answered; the run ended normally
    assert [m.role for m in canned.contexts[1].messages][-6:] == ["tool_result"] * 6
    last = ctx.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "recovered"
    assert isinstance(events[-1], AgentEndEvent) and events[-1].reason == "stop"


async def test_blocked_without_reason_and_raising_hooks() -> None:
    def before(ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult | None:
        if ctx.tool_call.id == "c2":
            raise RuntimeError("policy store down")
        return BeforeToolCallResult()

    canned = Canned([[call("add", {"a": 1, "b": 1}, id="c1"), call("add", {"a": 1, "b": 1}, id="c2")], text("ok")])
    ctx = AgentContext(tools=[add])
    await collect(
        agent_loop(UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream, before_tool_call=before))
    )
    r1, r2 = results(ctx)
    assert r1.is_error and "blocked" in r1.text
    assert r2.is_error and "before_tool_call failed" in r2.text and "policy store down" in r2.text


async def test_after_tool_call_can_replace_the_result() -> None:
    seen: list[tuple[str, bool]] = []

    async def after(ctx: AfterToolCallContext, signal: AbortSignal) -> AgentToolResult | None:
        seen.append((ctx.result.content[0].text, ctx.result.is_error))  # type: ignore[union-attr]
        if ctx.tool_call.id == "c1":
            return AgentToolResult.text("redacted", details={"original": ctx.result.content[0].text}, is_error=True)  # type: ignore[union-attr]
        return None

    canned = Canned([[call("add", {"a": 1, "b": 2}, id="c1"), call("add", {"a": 3, "b": 4}, id="c2")], text("ok")])
    ctx = AgentContext(tools=[add])
    events = await collect(
        agent_loop(UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream, after_tool_call=after))
    )
    r1, r2 = results(ctx)
    assert (r1.text, r1.is_error, r1.details) == ("redacted", True, {"original": "3"})
    assert (r2.text, r2.is_error) == ("7", False)
    assert sorted(seen) == [("3", False), ("7", False)]
    end = next(e for e in events if isinstance(e, ToolExecutionEndEvent))
    assert end.is_error and end.result.details == {"original": "3"}


async def test_tool_execution_start_carries_the_model_arguments() -> None:
    canned = Canned([[call("add", {"a": "1", "b": 2})], text("ok")])
    events = await collect(
        agent_loop(UserMessage("go"), AgentContext(tools=[add]), AgentLoopConfig(MODEL, stream_fn=canned.stream))
    )
    start = next(e for e in events if isinstance(e, ToolExecutionStartEvent))
    assert (start.tool_call_id, start.tool_name, start.args) == ("call_add", "add", {"a": "1", "b": 2})


async def test_abort_during_tools_every_call_gets_a_result() -> None:
    started = asyncio.Event()

    @tool
    async def cooperative(signal: AbortSignal) -> str:
        """Stops when aborted."""
        started.set()
        await signal.wait()
        raise RuntimeError("Command aborted")

    @tool
    async def stubborn() -> str:
        """Ignores the signal."""
        await asyncio.sleep(60)
        return "never"

    @tool
    async def quick() -> str:
        """Finishes at once."""
        return "quick done"

    canned = Canned(
        [[call("cooperative", id="c1"), call("stubborn", id="c2"), call("quick", id="c3")], text("never asked")]
    )
    ctx = AgentContext(tools=[cooperative, stubborn, quick])
    signal = AbortSignal()
    cfg = AgentLoopConfig(MODEL, stream_fn=canned.stream, abort_grace=0.05)
    task = asyncio.create_task(collect(agent_loop(UserMessage("go"), ctx, cfg, signal)))
    await started.wait()
    signal.abort()
    events = await asyncio.wait_for(task, 10)
    rs = {r.tool_call_id: r for r in results(ctx)}
    assert list(rs) == ["c1", "c2", "c3"]
    assert rs["c1"].is_error and rs["c1"].text == "Command aborted"
    assert rs["c2"].is_error and "aborted before it finished" in rs["c2"].text
    assert not rs["c3"].is_error and rs["c3"].text == "quick done"
    assert len(canned.contexts) == 1  # no further model call after the abort
    assert types(events)[-2:] == ["turn_end", "agent_end"]
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "aborted"
    turn_end = next(e for e in events if isinstance(e, TurnEndEvent))
    assert [r.tool_call_id for r in turn_end.tool_results] == ["c1", "c2", "c3"]


async def test_calls_not_started_when_already_aborted() -> None:
    ran: list[str] = []

    @tool
    async def side_effect() -> str:
        """Must not run after abort."""
        ran.append("ran")
        return "ran"

    signal = AbortSignal()

    def before(ctx: BeforeToolCallContext, sig: AbortSignal) -> None:
        return None

    canned = Canned([[call("side_effect", id="c1")], text("x")])
    ctx = AgentContext(tools=[side_effect])
    events: list[AgentEvent] = []
    async for ev in agent_loop(
        UserMessage("go"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream, before_tool_call=before), signal
    ):
        events.append(ev)
        if isinstance(ev, MessageEndEvent) and isinstance(ev.message, AssistantMessage):
            signal.abort()
    assert ran == []
    (r,) = results(ctx)
    assert r.is_error and "was not run" in r.text


async def test_cancelling_the_consumer_cancels_running_tools() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def forever() -> str:
        """Runs until cancelled."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    canned = Canned([[call("forever")], text("x")])
    task = asyncio.create_task(
        collect(
            agent_loop(
                UserMessage("go"), AgentContext(tools=[forever]), AgentLoopConfig(MODEL, stream_fn=canned.stream)
            )
        )
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(cancelled.wait(), 5)  # the tool's task was cancelled, not left running
