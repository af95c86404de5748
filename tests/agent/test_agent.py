"""The Agent class: state, subscriptions, busy errors, steering, follow-ups, abort, error surfacing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from nexus.agent import (
    Agent,
    AgentBusyError,
    AgentEvent,
    AgentStateError,
    CustomMessage,
    MessageUpdateEvent,
    tool,
)
from nexus.agent.loop import resolve_default_stream_fn
from nexus.errors import NexusError
from nexus.llm.events import AssistantMessageEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

from .canned import MODEL, Canned, call, text, types


def user_texts(agent: Agent) -> list[str]:
    out = []
    for m in agent.state.messages:
        if isinstance(m, UserMessage):
            out.append(m.content if isinstance(m.content, str) else "".join(getattr(b, "text", "") for b in m.content))
    return out


async def test_prompt_runs_to_completion_and_state_follows_events() -> None:
    @tool
    async def echo(x: int) -> str:
        """Echo."""
        return str(x)

    canned = Canned([[call("echo", {"x": 4})], text("four")])
    agent = Agent(model=MODEL, system_prompt="be brief", tools=[echo], stream_fn=canned.stream, thinking_level="low")
    seen: list[str] = []
    snapshots: list[tuple[bool, bool, frozenset[str]]] = []

    def listener(ev: AgentEvent) -> None:
        seen.append(ev.type)
        s = agent.state
        snapshots.append((s.is_streaming, s.stream_message is not None, frozenset(s.pending_tool_calls)))

    unsubscribe = agent.subscribe(listener)
    await agent.prompt("what is 4?")
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"
    assert all(s[0] for s in snapshots)  # streaming for the whole run
    i = seen.index("message_update")
    assert snapshots[i][1]  # stream_message set while streaming
    j = seen.index("tool_execution_start")
    assert snapshots[j][2] == {"call_echo"} and snapshots[seen.index("tool_execution_end")][2] == frozenset()
    state = agent.state
    assert not state.is_streaming and state.stream_message is None and state.error is None
    assert [m.role for m in state.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert canned.options[0] is not None and canned.options[0].thinking == "low"
    assert canned.contexts[0].system_prompt == "be brief"
    unsubscribe()
    canned.responses.append(text("again"))
    await agent.prompt("more")
    assert seen.count("agent_start") == 1  # unsubscribed


async def test_prompt_with_images_and_message_objects() -> None:
    canned = Canned([text("a cat"), text("ok")])
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    img = ImageContent("aGk=", "image/png")
    await agent.prompt("what is this?", images=[img])
    first = agent.state.messages[0]
    assert isinstance(first, UserMessage) and first.content == [TextContent("what is this?"), img]
    await agent.prompt(UserMessage("plain"))
    assert user_texts(agent)[-1] == "plain"


async def test_prompt_while_running_raises_busy_error_pointing_to_steer() -> None:
    gate = asyncio.Event()
    canned = Canned([text("slow answer")], pause_after={0: gate})
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    task = asyncio.create_task(agent.prompt("first"))
    while agent.state.stream_message is None:  # noqa: ASYNC110
        await asyncio.sleep(0)
    with pytest.raises(AgentBusyError) as info:
        await agent.prompt("second")
    assert isinstance(info.value, NexusError)
    assert "steer()" in str(info.value) and "follow_up()" in str(info.value)
    with pytest.raises(AgentBusyError):
        agent.replace_messages([])
    with pytest.raises(AgentBusyError):
        agent.reset()
    gate.set()
    await task
    await agent.wait_for_idle()
    assert user_texts(agent) == ["first"]


async def test_steering_is_injected_after_the_whole_batch_without_skipping_calls() -> None:
    ran: list[str] = []
    agent: Agent

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
    agent = Agent(model=MODEL, stream_fn=canned.stream, tools=[first, second])
    await agent.prompt("do both")
    assert sorted(ran) == ["first", "second"]
    roles = [m.role for m in agent.state.messages]
    assert roles == ["user", "assistant", "tool_result", "tool_result", "user", "assistant"]
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [r.text for r in results] == ["first done", "second done"] and not any(r.is_error for r in results)
    assert user_texts(agent) == ["do both", "change of plan"]
    # the model's second call saw the steering message after both results
    assert [m.role for m in canned.contexts[1].messages] == ["user", "assistant", "tool_result", "tool_result", "user"]
    assert not agent.has_queued_messages()


async def test_steering_queue_modes() -> None:
    canned = Canned([text("a"), text("b"), text("c"), text("d")])
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    agent.steer("s1")
    agent.steer("s2")
    await agent.prompt("p")  # one-at-a-time: s1 and s2 injected before separate model calls
    assert [m.role for m in agent.state.messages] == ["user", "user", "assistant", "user", "assistant"]
    assert user_texts(agent) == ["p", "s1", "s2"]
    agent.reset()
    agent.set_steering_mode("all")
    agent.steer("t1")
    agent.steer("t2")
    await agent.prompt("q")
    assert [m.role for m in agent.state.messages] == ["user", "user", "user", "assistant"]


async def test_follow_up_runs_when_the_agent_would_stop() -> None:
    canned = Canned([text("answer 1"), text("answer 2")])
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    events: list[str] = []

    def on_event(ev: AgentEvent) -> None:
        events.append(ev.type)
        if ev.type == "message_update" and events.count("message_update") == 1:
            agent.follow_up("and also this")

    agent.subscribe(on_event)
    await agent.prompt("question")
    assert user_texts(agent) == ["question", "and also this"]
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "user", "assistant"]
    assert events.count("agent_start") == 1 and events.count("agent_end") == 1


async def test_clear_queues_and_has_queued_messages() -> None:
    agent = Agent(model=MODEL, stream_fn=Canned([text("x")]).stream)
    agent.steer("s")
    agent.follow_up(UserMessage("f"))
    assert agent.has_queued_messages()
    agent.clear_steering_queue()
    assert agent.has_queued_messages()
    agent.clear_follow_up_queue()
    assert not agent.has_queued_messages()


async def test_continue_rules_on_agent() -> None:
    canned = Canned([text("hi"), text("from queue")])
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    with pytest.raises(AgentStateError, match="empty"):
        await agent.continue_()
    await agent.prompt("hello")
    with pytest.raises(AgentStateError, match="no message is queued"):
        await agent.continue_()
    agent.follow_up("queued")
    await agent.continue_()
    assert user_texts(agent) == ["hello", "queued"]


async def test_abort_during_streaming_keeps_partial() -> None:
    gate = asyncio.Event()
    canned = Canned([text("partial answer")], pause_after={0: gate})
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    task = asyncio.create_task(agent.prompt("go"))
    while agent.state.stream_message is None or not agent.state.stream_message.text:  # noqa: ASYNC110
        await asyncio.sleep(0)
    agent.abort()
    gate.set()
    await agent.wait_for_idle()
    await task
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted" and last.text == "partial"
    assert agent.state.error == "Request was aborted." and not agent.state.is_streaming


async def test_exception_in_loop_surfaces_as_state_error_and_error_reply() -> None:
    async def broken(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        raise ValueError("bad provider config")
        yield  # pragma: no cover

    agent = Agent(model=MODEL, stream_fn=broken)
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert agent.state.error is not None and "bad provider config" in agent.state.error
    assert last.error_message == agent.state.error


async def test_listener_exception_does_not_break_the_run(caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(model=MODEL, stream_fn=Canned([text("fine")]).stream)

    def bad(ev: AgentEvent) -> None:
        if isinstance(ev, MessageUpdateEvent):
            raise RuntimeError("ui bug")

    agent.subscribe(bad)
    await agent.prompt("hi")
    assert agent.state.error is None and isinstance(agent.state.messages[-1], AssistantMessage)
    assert "ui bug" in caplog.text


async def test_mutators_and_custom_messages() -> None:
    canned = Canned([text("x"), text("y")])
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    other = Model(id="other", provider="canned", api="canned")
    agent.set_model(other)
    agent.set_system_prompt("new prompt")
    agent.set_thinking_level("high")
    agent.append_message(CustomMessage("note", "for the UI"))
    await agent.prompt("go")
    assert canned.contexts[0].system_prompt == "new prompt"
    assert [m.role for m in canned.contexts[0].messages] == ["user"]  # custom message not sent
    assert agent.state.messages[0].role == "custom"
    agent.replace_messages([UserMessage("fresh start")])
    await agent.continue_()
    assert [m.role for m in canned.contexts[1].messages] == ["user"]  # view rebuilt after replace
    agent.clear_messages()
    assert agent.state.messages == []


def test_default_stream_fn_is_the_provider_layer() -> None:
    import sys

    resolved = resolve_default_stream_fn()
    assert resolved is sys.modules["nexus.llm.stream"].stream


async def test_missing_stream_fn_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import nexus.llm

    monkeypatch.setitem(sys.modules, "nexus.llm.stream", None)  # import fails
    monkeypatch.setattr(nexus.llm, "stream", None, raising=False)
    agent = Agent(model=MODEL, stream_fn=None)
    with pytest.raises(NexusError, match="stream_fn"):
        await agent.prompt("hi")
    assert not agent.is_running and agent.state.error is not None and "stream_fn" in agent.state.error


async def test_default_stream_fn_unknown_api_ends_with_error_reply() -> None:
    agent = Agent(model=Model(id="m", provider="nowhere", api="no-such-api"))
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert agent.state.error and "no-such-api" in agent.state.error


async def test_event_sequence_via_agent_matches_loop() -> None:
    canned = Canned([text("hi")])
    agent = Agent(model=MODEL, stream_fn=canned.stream)
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    await agent.prompt("hello")
    assert types(events) == [
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
