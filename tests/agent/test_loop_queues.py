"""The loop's steering and follow-up queues, abort, error surfacing and default stream function, through a
conversation that hands it queues as the engine's run does (``tests/agent/queued.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from nexus.agent import AgentStateError, tool
from nexus.agent.loop import resolve_default_stream_fn
from nexus.errors import NexusError
from nexus.llm.events import AssistantMessageEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantMessage, Context, Model, ToolResultMessage

from .canned import MODEL, Canned, call, text, types
from .queued import Queued


async def test_steering_is_injected_after_the_whole_batch_without_skipping_calls() -> None:
    ran: list[str] = []
    agent: Queued

    @tool
    async def first() -> str:
        """Steers the agent while it runs."""
        agent.steer("change of plan")
        ran.append("first")
        await asyncio.sleep(0)
        return "first done"

    @tool
    async def second() -> str:
        """Runs after the steer was queued."""
        await asyncio.sleep(0)
        ran.append("second")
        return "second done"

    canned = Canned([[call("first"), call("second")], text("ok, new plan")])
    agent = Queued(MODEL, canned.stream, tools=[first, second])
    await agent.prompt("do both")
    assert sorted(ran) == ["first", "second"]
    roles = [m.role for m in agent.messages]
    assert roles == ["user", "assistant", "tool_result", "tool_result", "user", "assistant"]
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [r.text for r in results] == ["first done", "second done"] and not any(r.is_error for r in results)
    assert agent.user_texts() == ["do both", "change of plan"]
    # the model's second call saw the steering message after both results
    assert [m.role for m in canned.contexts[1].messages] == ["user", "assistant", "tool_result", "tool_result", "user"]
    assert not agent.has_queued_messages()


async def test_steering_queue_modes() -> None:
    canned = Canned([text("a"), text("b"), text("c"), text("d")])
    agent = Queued(MODEL, canned.stream)
    agent.steer("s1")
    agent.steer("s2")
    await agent.prompt("p")  # one-at-a-time: s1 and s2 injected before separate model calls
    assert [m.role for m in agent.messages] == ["user", "user", "assistant", "user", "assistant"]
    assert agent.user_texts() == ["p", "s1", "s2"]
    agent = Queued(MODEL, canned.stream, steering_mode="all")
    agent.steer("t1")
    agent.steer("t2")
    await agent.prompt("q")
    assert [m.role for m in agent.messages] == ["user", "user", "user", "assistant"]


async def test_follow_up_runs_when_the_agent_would_stop() -> None:
    canned = Canned([text("answer 1"), text("answer 2")])
    agent = Queued(MODEL, canned.stream)
    seen: list[str] = []

    def on_event(ev: object) -> None:
        seen.append(ev.type)  # type: ignore[attr-defined]
        if seen[-1] == "message_update" and seen.count("message_update") == 1:
            agent.follow_up("and also this")

    agent.listeners.append(on_event)
    await agent.prompt("question")
    assert agent.user_texts() == ["question", "and also this"]
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert seen.count("agent_start") == 1 and seen.count("agent_end") == 1


async def test_continue_on_an_empty_conversation_is_refused() -> None:
    agent = Queued(MODEL, Canned([text("hi")]).stream)
    with pytest.raises(AgentStateError, match="empty"):
        await agent.continue_()


async def test_abort_during_streaming_keeps_partial() -> None:
    gate = asyncio.Event()
    canned = Canned([text("partial answer")], pause_after={0: gate})
    agent = Queued(MODEL, canned.stream)
    task = asyncio.create_task(agent.prompt("go"))
    while not any(e.type == "message_update" for e in agent.events):  # noqa: ASYNC110
        await asyncio.sleep(0)
    assert agent.signal is not None
    agent.signal.abort()
    gate.set()
    await task
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted" and last.text == "partial"
    assert agent.error == "Request was aborted."


async def test_exception_in_loop_surfaces_as_error_and_error_reply() -> None:
    async def broken(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        raise ValueError("bad provider config")
        yield  # pragma: no cover

    agent = Queued(MODEL, broken)
    await agent.prompt("hi")
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert agent.error is not None and "bad provider config" in agent.error
    assert last.error_message == agent.error


def test_default_stream_fn_is_the_provider_layer() -> None:
    import sys

    resolved = resolve_default_stream_fn()
    assert resolved is sys.modules["nexus.llm.stream"].stream


async def test_missing_stream_fn_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import nexus.llm

    monkeypatch.setitem(sys.modules, "nexus.llm.stream", None)  # import fails
    monkeypatch.setattr(nexus.llm, "stream", None, raising=False)
    agent = Queued(MODEL, None)
    with pytest.raises(NexusError, match="stream_fn"):
        await agent.prompt("hi")


async def test_default_stream_fn_unknown_api_ends_with_error_reply() -> None:
    agent = Queued(Model(id="m", provider="nowhere", api="no-such-api"), None)
    await agent.prompt("hi")
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert agent.error and "no-such-api" in agent.error


async def test_event_sequence() -> None:
    agent = Queued(MODEL, Canned([text("hi")]).stream)
    await agent.prompt("hello")
    assert types(agent.events) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_update",
        "message_update",
        "message_update",
        "message_update",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
