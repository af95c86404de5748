"""The event channel: envelopes in order, bounded subscriptions that never stall a run nor drop lifecycle events."""

from __future__ import annotations

import asyncio

from nexus.agent.events import AgentStartEvent, ToolExecutionUpdateEvent
from nexus.agent.tool_types import AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.callbacks import EngineCallbacks, callbacks_listener
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.events import EventChannel, ReplyDelta, RunStartEvent
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call


def _progress() -> ToolExecutionUpdateEvent:
    return ToolExecutionUpdateEvent("c1", "bash", {}, AgentToolResult.text("..."))


async def test_a_slow_subscriber_coalesces_deltas_drops_progress_and_keeps_lifecycle() -> None:
    channel = EventChannel("run-1", "main", "agent-a")
    slow = channel.subscribe(maxsize=4)
    channel.publish(RunStartEvent("turn-1"))
    for piece in ("Hel", "lo ", "wor", "ld"):
        channel.publish(ReplyDelta(piece, 1))
    for _ in range(50):
        channel.publish(_progress())  # progress past the bound is dropped
    channel.publish(AgentStartEvent())  # lifecycle: always kept, even over the bound
    channel.publish(ReplyDelta("!", 1))
    channel.close()
    items = [item async for item in slow]
    assert [i.type for i in items][:2] == ["run_start", "reply_delta"]
    assert items[1].event.delta == "Hello world"  # four deltas, one item, no text lost
    assert "agent_start" in [i.type for i in items] and items[-1].event.delta == "!"
    assert slow.dropped > 0 and len(items) <= 4 + 2
    assert [i.seq for i in items] == sorted(i.seq for i in items) and items[0].seq == 1
    assert {(i.run_id, i.session_label, i.agent_id) for i in items} == {("run-1", "main", "agent-a")}


async def test_a_never_reading_subscriber_does_not_stall_the_run(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("ls", {}, id="c1"), text("a reply " * 200)], chunk_chars=2)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    execution = env.start(AgentSpec(model=scripted.model), "main", "hi")
    stuck = execution.subscribe(maxsize=2)  # never read while the run goes on
    states: list[str] = []
    execution.on_event(lambda e: states.append(e.event.state) if e.type == "state" else None)
    result = await asyncio.wait_for(execution.result, 10)
    assert result.reply.startswith("a reply")
    assert states[-2:] == ["finishing", "done"] and "tools" in states and "streaming" in states
    items = [item async for item in stuck]
    reply = "".join(i.event.delta for i in items if i.type == "reply_delta")
    assert reply == result.reply  # coalesced, complete
    assert items[-1].type == "state" and items[-2].type == "run_end"


async def test_callbacks_are_a_mapping_of_the_channel() -> None:
    seen: list[object] = []
    channel = EventChannel("r", "s")
    channel.listen(
        callbacks_listener(EngineCallbacks(on_partial_reply=seen.append, on_agent_event=lambda p, t: seen.append(p)))
    )
    channel.publish(RunStartEvent(None))
    channel.publish(ReplyDelta("x", 1))
    assert seen == ["start", "x"]
