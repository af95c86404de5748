"""agent_loop / agent_loop_continue: event order, hooks, custom messages, guards, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from nexus.agent import (
    AgentContext,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentStateError,
    AgentTool,
    AgentToolResult,
    CustomMessage,
    LoopMessage,
    MessageUpdateEvent,
    TurnEndEvent,
    agent_loop,
    agent_loop_continue,
    tool,
)
from nexus.errors import ConfigError
from nexus.llm.abort import AbortSignal
from nexus.llm.events import AssistantMessageEvent, StartEvent, TextDeltaEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantMessage, Context, Message, Model, TextContent, ToolResultMessage, UserMessage

from .canned import MODEL, Canned, call, text, types


@tool
async def echo(x: int) -> str:
    """Echo a number back."""
    return f"echo {x}"


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [ev async for ev in events]


def config(canned: Canned, **kw: object) -> AgentLoopConfig:
    return AgentLoopConfig(MODEL, stream_fn=canned.stream, **kw)  # type: ignore[arg-type]


async def test_event_order_prompt_with_one_tool_call() -> None:
    canned = Canned([[TextContent("let me"), call("echo", {"x": 1})], text("done")])
    ctx = AgentContext("sys", [], [echo])
    events = await collect(agent_loop(UserMessage("hi"), ctx, config(canned)))
    assert types(events) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_update",  # text_start
        "message_update",  # delta
        "message_update",  # delta
        "message_update",  # text_end
        "message_update",  # toolcall_start
        "message_update",  # toolcall_end
        "message_end:assistant",
        "tool_execution_start:call_echo",
        "tool_execution_end:call_echo",
        "message_start:tool_result",
        "message_end:tool_result",
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_update",
        "message_update",
        "message_update",
        "message_update",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "stop" and end.error is None
    # agent_end carries the new messages, and they were appended to the context in order
    assert [m.role for m in end.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert ctx.messages == end.messages
    result = ctx.messages[2]
    assert isinstance(result, ToolResultMessage) and result.text == "echo 1" and not result.is_error
    turn_ends = [e for e in events if isinstance(e, TurnEndEvent)]
    assert turn_ends[0].tool_results == [result] and turn_ends[1].tool_results == []
    # the second model call saw the tool result, the tools and the system prompt
    second = canned.contexts[1]
    assert second.system_prompt == "sys" and [t.name for t in second.tools] == ["echo"]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool_result"]
    updates = [e for e in events if isinstance(e, MessageUpdateEvent)]
    assert isinstance(updates[1].assistant_event, TextDeltaEvent)


async def test_history_is_sent_and_context_appended_across_runs() -> None:
    canned = Canned([text("one"), text("two")])
    ctx = AgentContext(messages=[])
    await collect(agent_loop(UserMessage("a"), ctx, config(canned)))
    await collect(agent_loop(UserMessage("b"), ctx, config(canned)))
    assert [m.role for m in canned.contexts[1].messages] == ["user", "assistant", "user"]
    assert len(ctx.messages) == 4


async def test_custom_messages_stay_in_context_but_never_reach_the_model() -> None:
    canned = Canned([text("ok")])
    note = CustomMessage("notification", "UI only")
    ctx = AgentContext(messages=[UserMessage("earlier"), note])
    events = await collect(agent_loop(UserMessage("hi"), ctx, config(canned)))
    sent = canned.contexts[0].messages
    assert [m.role for m in sent] == ["user", "user"]
    assert note in ctx.messages and all(not isinstance(m, CustomMessage) for m in sent)
    assert isinstance(events[-1], AgentEndEvent) and events[-1].reason == "stop"


async def test_transform_context_and_convert_to_llm_run_per_call_on_copies() -> None:
    canned = Canned([[call("echo", {"x": 2})], text("done")])
    seen_transform: list[int] = []

    async def transform(messages: list[LoopMessage], signal: AbortSignal) -> list[LoopMessage]:
        seen_transform.append(len(messages))
        messages.append(UserMessage("injected by transform"))  # must not leak into the stored context
        return messages

    def convert(messages: list[LoopMessage]) -> list[Message]:
        out: list[Message] = []
        for m in messages:
            if isinstance(m, CustomMessage):
                out.append(UserMessage(f"[{m.custom_type}] {m.content}"))
            else:
                out.append(m)
        return out

    ctx = AgentContext(messages=[CustomMessage("artifact", "code")], tools=[echo])
    await collect(
        agent_loop(UserMessage("hi"), ctx, config(canned, transform_context=transform, convert_to_llm=convert))
    )
    assert seen_transform == [2, 4]  # once per model call, with the history as it stood
    first = canned.contexts[0].messages
    assert isinstance(first[0], UserMessage) and first[0].content == "[artifact] code"
    assert isinstance(first[-1], UserMessage) and first[-1].content == "injected by transform"
    assert not any(isinstance(m, UserMessage) and m.content == "injected by transform" for m in ctx.messages)
    assert [m.role for m in ctx.messages] == ["custom", "user", "assistant", "tool_result", "assistant"]


async def test_max_iterations_stops_with_a_clear_error_and_can_continue() -> None:
    canned = Canned([[call("echo", {"x": i}, id=f"c{i}")] for i in range(5)] + [text("finally")])
    ctx = AgentContext(tools=[echo])
    events = await collect(agent_loop(UserMessage("loop"), ctx, config(canned, max_iterations=2)))
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "max_iterations"
    assert end.error is not None and "max_iterations=2" in end.error
    assert len(canned.contexts) == 2
    assert types(events).count("turn_start") == 2 and types(events)[-2] == "turn_end"
    assert isinstance(ctx.messages[-1], ToolResultMessage)  # every call got its result
    # the conversation is valid to continue from
    events = await collect(agent_loop_continue(ctx, config(canned, max_iterations=10)))
    assert isinstance(events[-1], AgentEndEvent) and events[-1].reason == "stop"
    last = ctx.messages[-1]
    assert isinstance(last, AssistantMessage) and last.text == "finally"


async def test_bad_max_iterations_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_iterations"):
        agent_loop(
            UserMessage("x"), AgentContext(), AgentLoopConfig(MODEL, stream_fn=Canned([]).stream, max_iterations=0)
        )


async def test_continue_rules() -> None:
    cfg = config(Canned([text("hello")]))
    with pytest.raises(AgentStateError, match="empty"):
        agent_loop_continue(AgentContext(), cfg)
    with pytest.raises(AgentStateError, match="assistant"):
        agent_loop_continue(AgentContext(messages=[UserMessage("q"), AssistantMessage([TextContent("a")])]), cfg)
    ctx = AgentContext(messages=[UserMessage("q")])
    events = await collect(agent_loop_continue(ctx, cfg))
    assert types(events)[:3] == ["agent_start", "turn_start", "message_start:assistant"]
    assert [m.role for m in ctx.messages] == ["user", "assistant"]


async def test_provider_error_ends_the_run_with_the_error_message() -> None:
    canned = Canned(["rate limited, try later"])
    ctx = AgentContext()
    events = await collect(agent_loop(UserMessage("hi"), ctx, config(canned)))
    assert types(events)[-4:] == ["message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "error" and end.error == "rate limited, try later"
    last = ctx.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"


async def test_exception_in_stream_fn_becomes_a_visible_error_reply() -> None:
    async def broken(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        partial = AssistantMessage([TextContent("half an ans")])
        yield StartEvent(partial)
        raise RuntimeError("socket exploded")

    ctx = AgentContext()
    events = await collect(agent_loop(UserMessage("hi"), ctx, AgentLoopConfig(MODEL, stream_fn=broken)))
    assert types(events) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    last = ctx.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"
    assert last.error_message is not None and "RuntimeError: socket exploded" in last.error_message
    assert last.text == "half an ans"  # partial content kept, not an empty reply
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "error" and "socket exploded" in (end.error or "")


async def test_exception_in_a_hook_before_streaming_is_reported() -> None:
    def convert(messages: list[LoopMessage]) -> list[Message]:
        raise KeyError("missing")

    ctx = AgentContext()
    events = await collect(agent_loop(UserMessage("hi"), ctx, config(Canned([text("x")]), convert_to_llm=convert)))
    assert types(events)[-4:] == ["message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]
    last = ctx.messages[-1]
    assert isinstance(last, AssistantMessage) and "KeyError" in (last.error_message or "")


async def test_stream_without_terminal_event_is_an_error() -> None:
    async def truncated(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        yield StartEvent(AssistantMessage())

    ctx = AgentContext()
    events = await collect(agent_loop(UserMessage("hi"), ctx, AgentLoopConfig(MODEL, stream_fn=truncated)))
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "error"
    assert "without a done or error event" in (end.error or "")


async def test_abort_during_streaming_keeps_partial_and_ends_aborted() -> None:
    gate = asyncio.Event()
    canned = Canned([[TextContent("partial answer"), call("echo", {"x": 1})]], pause_after={0: gate})
    signal = AbortSignal()
    ctx = AgentContext(tools=[echo])
    events: list[AgentEvent] = []

    async def run() -> None:
        async for ev in agent_loop(UserMessage("hi"), ctx, config(canned), signal):
            events.append(ev)

    task = asyncio.create_task(run())
    while not any(isinstance(e, MessageUpdateEvent) and isinstance(e.assistant_event, TextDeltaEvent) for e in events):  # noqa: ASYNC110
        await asyncio.sleep(0)
    signal.abort()
    gate.set()
    await task
    last = ctx.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
    assert last.text == "partial"  # first half streamed before the abort
    assert not last.tool_calls and "tool_execution_start" not in " ".join(types(events))
    end = events[-1]
    assert isinstance(end, AgentEndEvent) and end.reason == "aborted"


async def test_get_api_key_is_called_per_model_call_and_signal_passed() -> None:
    canned = Canned([[call("echo", {"x": 1})], text("ok")])
    asked: list[str] = []

    async def get_key(provider: str) -> str:
        asked.append(provider)
        return f"key-{len(asked)}"

    signal = AbortSignal()
    await collect(
        agent_loop(UserMessage("hi"), AgentContext(tools=[echo]), config(canned, get_api_key=get_key), signal)
    )
    assert asked == ["canned", "canned"]
    assert [o.api_key for o in canned.options if o] == ["key-1", "key-2"]
    assert all(o is not None and o.signal is signal for o in canned.options)


async def test_options_template_is_passed_through() -> None:
    canned = Canned([text("ok")])
    opts = StreamOptions(temperature=0.2, max_tokens=99, thinking="high", tool_choice="none")
    await collect(agent_loop(UserMessage("hi"), AgentContext(), config(canned, options=opts)))
    sent = canned.options[0]
    assert sent is not None and (sent.temperature, sent.max_tokens, sent.thinking, sent.tool_choice) == (
        0.2,
        99,
        "high",
        "none",
    )
    assert opts.signal is None  # the template itself is not modified


async def test_steering_and_follow_up_sources_in_the_loop() -> None:
    canned = Canned([[call("echo", {"x": 1})], text("after steer"), text("after follow-up")])
    steering = [[], [UserMessage("steer!")]]  # polled at start, then after turn 1
    follow = [[UserMessage("one more")]]

    def get_steering() -> list[LoopMessage]:
        return list(steering.pop(0)) if steering else []

    async def get_follow() -> list[LoopMessage]:
        return list(follow.pop(0)) if follow else []

    ctx = AgentContext(tools=[echo])
    events = await collect(
        agent_loop(
            UserMessage("go"),
            ctx,
            config(canned, get_steering_messages=get_steering, get_follow_up_messages=get_follow),
        )
    )
    roles = [(m.role, m.content if isinstance(m, UserMessage) else "") for m in ctx.messages]
    assert roles == [
        ("user", "go"),
        ("assistant", ""),
        ("tool_result", ""),
        ("user", "steer!"),
        ("assistant", ""),
        ("user", "one more"),
        ("assistant", ""),
    ]
    seq = types(events)
    # injected messages emit their own message events inside a turn
    assert seq.count("message_start:user") == 3 and seq.count("turn_start") == 3


async def test_unexpected_tool_return_type_is_an_error_result() -> None:
    async def execute(call_id: str, args: dict[str, object], signal: AbortSignal, on_update: object) -> AgentToolResult:
        return "not a result"  # type: ignore[return-value]

    bad = AgentTool("bad", "returns the wrong type", {"type": "object"}, execute)
    ctx = AgentContext(tools=[bad])
    await collect(agent_loop(UserMessage("x"), ctx, config(Canned([[call("bad")], text("ok")]))))
    result = ctx.messages[2]
    assert isinstance(result, ToolResultMessage) and result.is_error and "not an AgentToolResult" in result.text
