"""A steer is never lost: for every way a run can end, its receipt is delivered (in the turn) or returned.

Done, error, abort, overflow, max iterations and compaction in progress; plus one-per-safe-point
mode and the ``steer`` events on the channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nexus.agent.steering import SteerReceipt
from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentResult, AgentSpec, EngineLimits, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.execute import Execution
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.llm.abort import AbortSignal
from nexus.llm.events import AssistantMessageEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import Context, Model, UserMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import overflow, text, tool_call


def _env(ledger: Ledger, stream: Any, **kw: Any) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=stream, cooldowns=ProfileCooldowns(), **kw)


def _slow_tool(started: asyncio.Event, release: asyncio.Event) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        started.set()
        await release.wait()
        return AgentToolResult.text("slow done")

    return AgentTool("slow", "a slow tool", {"type": "object", "properties": {}}, execute)


def assert_not_lost(receipt: SteerReceipt, result: AgentResult, ledger: Ledger) -> None:
    assert receipt.settled, receipt
    texts = [m.text for m in result.messages]
    if receipt.status == "delivered":
        assert receipt.position is not None and texts[receipt.position] == receipt.message.content
        assert receipt not in result.returned_steers
        head = run_inline(ledger.sessions.head("main"))  # and it is stored with the turn
        assert head is not None and receipt.message.content in [
            m.text for m in run_inline(ledger.turns.messages(head.id))
        ]
    else:
        assert receipt in result.returned_steers and receipt.reason
        assert receipt.message.content not in texts


async def test_done_run_returns_a_late_steer_at_once(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("done")])
    env = _env(ledger, scripted.stream)
    execution = env.start(AgentSpec(model=scripted.model), "main", "hi")
    result = await execution.result
    late = execution.steer("after the end")
    assert late.status == "returned" and "ended" in (late.reason or "") and result.returned_steers == []


async def _run_inside_a_slow_tool(ledger: Ledger) -> tuple[Execution, asyncio.Event]:
    """A run that is inside a tool call until the returned event is set (steers wait meanwhile)."""
    started, release = asyncio.Event(), asyncio.Event()
    scripted = ScriptedModel([tool_call("slow", {}, id="s1"), text("never")])
    env = _env(ledger, scripted.stream, tools=[_slow_tool(started, release)])
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    await asyncio.wait_for(started.wait(), 5)
    return execution, release


async def test_abort_returns_pending_steers_in_the_result(ledger: Ledger) -> None:
    execution, release = await _run_inside_a_slow_tool(ledger)
    receipt = execution.steer("change of plan")
    execution.abort("user stop")
    release.set()
    result = await execution.result
    assert result.stop_reason == "aborted" and receipt.status == "returned"
    assert "aborted" in (receipt.reason or "")
    assert_not_lost(receipt, result, ledger)


async def test_a_steer_after_abort_is_returned_in_the_result(ledger: Ledger) -> None:
    """A steer offered once the run was aborted (it has not ended yet) is handed back and listed in
    ``returned_steers``, after those pending at the abort: the caller requeues them from the result too."""
    execution, release = await _run_inside_a_slow_tool(ledger)
    before = execution.steer("before the abort")
    execution.abort("user stop")
    after = execution.steer("after the abort")
    again = execution.steer("and once more")
    assert after.status == "returned" and "aborted" in (after.reason or "")
    release.set()
    result = await execution.result
    assert result.stop_reason == "aborted"
    assert result.returned_steers == [before, after, again]
    for receipt in (before, after, again):
        assert_not_lost(receipt, result, ledger)


async def test_max_iterations_delivers_a_taken_steer_into_the_turn(ledger: Ledger) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    scripted = ScriptedModel([tool_call("slow", {}, id="s1"), text("unused")])
    env = _env(ledger, scripted.stream, tools=[_slow_tool(started, release)], limits=EngineLimits(max_iterations=1))
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    await asyncio.wait_for(started.wait(), 5)
    receipt = execution.steer("one more thing")
    release.set()
    result = await execution.result
    assert result.stop_reason == "tool_use"  # stopped by the iteration guard
    assert receipt.status == "delivered" and result.messages[-1].text == "one more thing"
    assert_not_lost(receipt, result, ledger)


async def test_overflow_recovery_keeps_the_steer(ledger: Ledger) -> None:
    scripted = ScriptedModel([overflow(), text("answer after recovery")])
    holder: list[SteerReceipt] = []
    box: list[Execution] = []

    async def stream(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        if not holder:  # arrives while the first call is about to overflow
            holder.append(box[0].steer("while overflowing"))
        async for event in scripted.stream(model, context, options):
            yield event

    env = _env(ledger, stream)
    box.append(env.start(AgentSpec(model=scripted.model), "main", "hi"))
    result = await box[0].result
    assert_not_lost(holder[0], result, ledger)


async def test_one_per_safe_point_mode_delivers_one_at_a_time(ledger: Ledger) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    scripted = ScriptedModel([tool_call("slow", {}, id="s1"), text("first"), text("second")])
    env = _env(ledger, scripted.stream, tools=[_slow_tool(started, release)])
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    settled: list[str] = []
    execution.on_event(lambda e: settled.append(e.event.receipt.id) if e.type == "steer" else None)
    await asyncio.wait_for(started.wait(), 5)
    one = execution.steer(UserMessage("q1"), id="a", mode="one")
    two = execution.steer(UserMessage("q2"), id="b", mode="one")
    release.set()
    result = await execution.result
    assert (one.status, two.status) == ("delivered", "delivered")
    assert two.position is not None and one.position is not None and two.position > one.position + 1  # a call between
    assert settled == ["a", "b"]
    assert [m.text for m in result.messages][-4:] == ["q1", "first", "q2", "second"]


async def test_steered_messages_are_stored_with_their_source(ledger: Ledger) -> None:
    """Regression: a steer joined the turn in the ledger with ``source`` NULL (the query had one)."""
    started, release = asyncio.Event(), asyncio.Event()
    scripted = ScriptedModel([tool_call("slow", {}, id="s1"), text("noted both")])
    env = _env(ledger, scripted.stream, tools=[_slow_tool(started, release)])
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    await asyncio.wait_for(started.wait(), 5)
    plain = execution.steer("first addition")
    sent = execution.steer("second addition", source="telegram:alice")
    release.set()
    result = await execution.result
    assert plain.status == sent.status == "delivered" and result.turn_id is not None
    rows = await ledger.turns.messages(result.turn_id)
    stored = {m.text: m.source for m in rows}
    assert stored["first addition"] == "steer" and stored["second addition"] == "telegram:alice"
    assert rows[0].source is not None and stored["noted both"] is None  # the query keeps its own; replies have none


async def test_a_bad_steer_raises_at_the_call_and_the_run_goes_on(ledger: Ledger) -> None:
    # steer(None) was taken as pending, then failed the crash journal and the result with a TypeError:
    # the run's reply was lost over one bad call
    execution, release = await _run_inside_a_slow_tool(ledger)
    bad: list[tuple[object, dict[str, object], type[Exception], str]] = [
        (None, {}, TypeError, "UserMessage or text, got NoneType"),
        (5, {}, TypeError, "got int"),
        ("x", {"mode": "bogus"}, ValueError, "'all' or 'one'"),
        ("x", {"id": 5}, TypeError, "id must be"),
        ("x", {"source": None}, TypeError, "source must be"),
    ]
    for message, options, error, said in bad:
        with pytest.raises(error, match=said):
            execution.steer(message, **options)  # type: ignore[arg-type]
    good = execution.steer("the real one")
    release.set()
    result = await execution.result
    assert result.stop_reason != "error" and good.status == "delivered", result
    assert [r.message.content for r in result.returned_steers] == []
    assert_not_lost(good, result, ledger)
