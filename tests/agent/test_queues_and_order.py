"""Steering / follow-up injection order, queue modes for both queues, and custom-message filtering paths."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from nexus.agent import (
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    CustomMessage,
    LoopMessage,
    MessageStartEvent,
    agent_loop,
    tool,
)
from nexus.llm.abort import AbortSignal
from nexus.llm.types import AssistantMessage, UserMessage

from .canned import MODEL, Canned, call, text, types
from .queued import Queued


def compact(labels: list[str]) -> list[str]:
    """Event labels without the streaming updates (their count depends on the canned stream)."""
    return [t for t in labels if t != "message_update"]


async def test_steering_event_order_matches_pi_agent_core() -> None:
    agent: Queued

    @tool
    async def work(n: int) -> str:
        """Queues a steering message while the batch runs."""
        if n == 1:
            agent.steer("steer now")
        await asyncio.sleep(0)
        return f"done {n}"

    canned = Canned([[call("work", {"n": 1}, id="a"), call("work", {"n": 2}, id="b")], text("steered")])
    agent = Queued(MODEL, canned.stream, tools=[work])
    await agent.prompt("go")
    events = agent.events
    assert compact(types(events)) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:a",
        "tool_execution_start:b",
        "tool_execution_end:a",
        "message_start:tool_result",
        "message_end:tool_result",
        "tool_execution_end:b",
        "message_start:tool_result",
        "message_end:tool_result",
        "turn_end",
        "turn_start",
        "message_start:user",  # the steering message, injected after the whole batch
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    results = [m for m in agent.messages if m.role == "tool_result"]
    assert [r.is_error for r in results] == [False, False]  # no call skipped


async def test_steering_queued_during_a_final_answer_gets_another_turn_before_follow_ups() -> None:
    canned = Canned([text("first answer"), text("to the steer"), text("to the follow-up")])
    agent = Queued(MODEL, canned.stream)

    def on_event(ev: AgentEvent) -> None:
        first_reply = isinstance(ev, MessageStartEvent) and ev.message.role == "assistant" and len(canned.contexts) == 1
        if first_reply and not agent.has_queued_messages():
            agent.follow_up("later")
            agent.steer("now")

    agent.listeners.append(on_event)
    await agent.prompt("q")
    assert agent.user_texts() == ["q", "now", "later"]
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]


async def test_follow_up_queue_modes() -> None:
    canned = Canned([text("a"), text("b"), text("c"), text("d")])
    agent = Queued(MODEL, canned.stream)
    agent.follow_up("f1")
    agent.follow_up("f2")
    await agent.prompt("p")  # one-at-a-time (default): a model call per follow-up
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert agent.user_texts() == ["p", "f1", "f2"]

    canned = Canned([text("a"), text("b")])
    agent = Queued(MODEL, canned.stream, follow_up_mode="all")
    agent.follow_up("g1")
    agent.follow_up("g2")
    await agent.prompt("p")  # all: both follow-ups injected together before one model call
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "user", "assistant"]
    assert len(canned.contexts) == 2


async def test_custom_messages_are_dropped_when_only_transform_context_is_given() -> None:
    canned = Canned([text("ok")])

    def transform(messages: list[LoopMessage], signal: AbortSignal) -> list[LoopMessage]:
        return [*messages, CustomMessage("note", "added by transform, UI only")]

    ctx = AgentContext(messages=[CustomMessage("note", "stored, UI only")])
    await _drain(
        agent_loop(UserMessage("hi"), ctx, AgentLoopConfig(MODEL, stream_fn=canned.stream, transform_context=transform))
    )
    assert [m.role for m in canned.contexts[0].messages] == ["user"]
    assert [m.role for m in ctx.messages] == ["custom", "user", "assistant"]


async def _drain(events: AsyncIterator[AgentEvent]) -> None:
    async for _ in events:
        pass


async def test_messages_queued_when_the_iteration_guard_stops_are_kept_and_answered_by_continue() -> None:
    @tool
    async def step() -> str:
        """Queues messages while the run is about to hit its limit."""
        agent.steer("steered at the limit")
        agent.follow_up("follow-up at the limit")
        return "stepped"

    canned = Canned([[call("step")], text("answer to the steer"), text("answer to the follow-up")])
    agent = Queued(MODEL, canned.stream, tools=[step], max_iterations=1)
    await agent.prompt("go")
    events = agent.events
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "max_iterations"
    assert compact(types(events))[-4:] == ["turn_end", "message_start:user", "message_end:user", "agent_end"]
    assert agent.user_texts() == ["go", "steered at the limit"]  # taken from the queue, so kept in the conversation
    assert agent.error is not None and "max_iterations=1" in agent.error
    agent.max_iterations = 10
    await agent.continue_()
    assert agent.user_texts() == ["go", "steered at the limit", "follow-up at the limit"]
    replies = [m.text for m in agent.messages if isinstance(m, AssistantMessage)]
    assert replies[-2:] == ["answer to the steer", "answer to the follow-up"]
    assert not agent.has_queued_messages()
