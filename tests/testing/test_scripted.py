"""ScriptedModel: the events it streams, what it records, and how failures look."""

from __future__ import annotations

import asyncio
import re

import pytest

from nexus.llm.abort import AbortSignal
from nexus.llm.errors import is_context_overflow
from nexus.llm.events import AssistantMessageEvent, DoneEvent, ErrorEvent
from nexus.llm.options import StreamOptions
from nexus.llm.registry import known_apis, resolve_api
from nexus.llm.types import (
    AssistantMessage,
    Context,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)
from nexus.testing import ScriptedModel, ScriptError
from nexus.testing.steps import (
    cut,
    from_context,
    html_error,
    http_error,
    malformed,
    overflow,
    reply,
    stall,
    stream_error,
    text,
    thinking,
    tool_call,
)


def ctx(prompt: str = "hello") -> Context:
    return Context(system_prompt="be brief", messages=[UserMessage(prompt)])


async def run(
    model: ScriptedModel, context: Context | None = None, options: StreamOptions | None = None
) -> list[AssistantMessageEvent]:
    return [e async for e in model.stream(model.model, context or ctx(), options)]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


async def test_text_reply_streams_small_chunks_and_estimates_usage() -> None:
    words = "the quick brown fox jumps over the lazy dog " * 3
    model = ScriptedModel([text(words)], chunk_chars=8)
    events = await run(model)
    types = [e.type for e in events]
    assert types[0] == "start" and types[1] == "text_start" and types[-2:] == ["text_end", "done"]
    deltas = [e.delta for e in events if e.type == "text_delta"]
    assert len(deltas) == -(-len(words) // 8) and all(len(d) <= 8 for d in deltas)
    assert "".join(deltas) == words
    message = final(events)
    assert message.text == words and message.stop_reason == "stop"
    assert message.usage.output == -(-len(words) // 4)
    assert message.usage.input > 0 and message.usage.total == message.usage.input + message.usage.output
    assert (message.api, message.provider, message.model) == ("scripted", "scripted", "scripted-1")


async def test_combined_reply_has_thinking_text_and_tool_call_in_order() -> None:
    model = ScriptedModel([reply(thinking("let me see"), text("reading"), tool_call("read", {"path": "a.txt"}))])
    events = await run(model)
    message = final(events)
    assert isinstance(events[-1], DoneEvent) and events[-1].reason == "tool_use"
    assert message.stop_reason == "tool_use"
    thought, said, call = message.content
    assert isinstance(thought, ThinkingContent) and thought.thinking == "let me see" and thought.signature
    assert isinstance(said, TextContent) and said.text == "reading"
    assert isinstance(call, ToolCall) and call.name == "read" and call.arguments == {"path": "a.txt"}
    assert call.id.startswith("toolu_scripted_")
    end = next(e for e in events if e.type == "toolcall_end")
    assert end.tool_call.arguments == {"path": "a.txt"}
    raw = "".join(e.delta for e in events if e.type == "toolcall_delta")
    assert raw == '{"path":"a.txt"}'
    # the tool call is announced complete only at toolcall_end
    start_index = next(i for i, e in enumerate(events) if e.type == "toolcall_start")
    assert all(e.type != "done" for e in events[start_index:-1])


async def test_steps_are_consumed_in_order_and_calls_are_snapshots() -> None:
    model = ScriptedModel([text("one"), tool_call("ls", {}, id="call-7"), text("three")])
    context = ctx("first")
    assert final(await run(model, context)).text == "one"
    context.messages.append(UserMessage("second"))
    assert final(await run(model, context)).tool_calls[0].id == "call-7"
    assert model.pending == 1
    with pytest.raises(AssertionError, match="1 scripted step\\(s\\) never requested after 2 call"):
        model.assert_complete()
    assert final(await run(model, context)).text == "three"
    model.assert_complete()
    assert [len(c.messages) for c in model.calls] == [1, 2, 2]
    context.messages.clear()
    assert len(model.calls[0].messages) == 1  # snapshots are not the caller's objects


async def test_empty_queue_is_an_error_event_not_an_exception() -> None:
    model = ScriptedModel()
    events = await run(model)
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].error.error_message == "No more scripted responses queued"
    model.append(text("now"))
    assert final(await run(model)).text == "now"


def test_append_rejects_non_steps() -> None:
    with pytest.raises(ScriptError, match=re.escape("step 0: expected a step from nexus.testing.steps, got str")):
        ScriptedModel(["hello"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("step", "kind", "needle"),
    [
        (http_error(401), "auth_permanent", "invalid x-api-key"),
        (http_error(401, "token expired"), "auth", "token expired"),
        (http_error(429, retry_after=7), "rate_limit", "429"),
        (http_error(500), "timeout", "Internal server error"),
        (http_error(503, "overloaded, try later"), "overloaded", "503"),
        (http_error(529), "overloaded", "Overloaded"),
        (html_error(502), "timeout", "HTML error page"),
        (overflow(), "context_overflow", "prompt is too long: 250000 tokens > 200000 maximum"),
    ],
)
async def test_http_failures_look_like_the_provider_adapter_reports_them(step: object, kind: str, needle: str) -> None:
    model = ScriptedModel([step], api="anthropic-messages")  # type: ignore[list-item]
    events = await run(model)
    assert len(events) == 1 and isinstance(events[0], ErrorEvent) and events[0].reason == "error"
    message = events[0].error
    assert message.stop_reason == "error" and message.error_kind == kind
    assert needle in (message.error_message or "")
    if kind == "rate_limit":
        assert message.retry_after == 7
    assert is_context_overflow(message) == (kind == "context_overflow")


async def test_openai_style_overflow_is_detected_too() -> None:
    model = ScriptedModel([overflow("openai", tokens=130_000, maximum=128_000)])
    message = final(await run(model))
    assert "maximum context length is 128000 tokens" in (message.error_message or "")
    assert message.error_kind == "context_overflow" and is_context_overflow(message)


async def test_cut_keeps_partial_content() -> None:
    model = ScriptedModel([cut(after_chunks=3, of=text("partial words that never finish"))], chunk_chars=4)
    events = await run(model)
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]
    message = final(events)
    assert message.text == "part" and message.error_kind == "network"
    assert "connection" in (message.error_message or "")


async def test_malformed_is_reported_like_the_adapters_do() -> None:
    message = final(await run(ScriptedModel([malformed(after_chunks=2, data="{oops")])))
    assert message.error_kind == "unknown" and message.error_message == "malformed SSE data from provider: '{oops'"


@pytest.mark.parametrize(
    ("api", "status", "kind", "needle"),
    [
        ("anthropic-messages", 529, "overloaded", "overloaded_error: Overloaded"),
        ("anthropic-messages", 429, "rate_limit", "rate_limit_error: Number of request tokens"),
        ("openai-completions", 500, "unknown", "server_error: The server had an error"),
    ],
)
async def test_stream_error_after_some_content(api: str, status: int, kind: str, needle: str) -> None:
    model = ScriptedModel([stream_error(after_chunks=3, status=status, of=text("abcdefgh"))], api=api)
    model.chunk_chars = 4
    events = await run(model)
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]
    message = final(events)
    assert message.text == "abcd" and message.error_kind == kind
    assert (message.error_message or "").startswith(needle)


async def test_stall_longer_than_timeout_fails_as_timeout() -> None:
    model = ScriptedModel([stall(after_chunks=2, seconds=30, then=text("late"))])
    events = await run(model, options=StreamOptions(timeout=0.05))
    assert [e.type for e in events] == ["start", "text_start", "error"]
    assert final(events).error_kind == "timeout"


async def test_short_stall_then_finishes() -> None:
    model = ScriptedModel([stall(after_chunks=1, seconds=0.01, then=text("late but whole"))])
    assert final(await run(model, options=StreamOptions(timeout=None))).text == "late but whole"


async def test_abort_mid_stream_ends_with_aborted_and_partial() -> None:
    model = ScriptedModel([text("x" * 400)], chunk_chars=4)
    signal = AbortSignal()
    seen: list[AssistantMessageEvent] = []
    async for event in model.stream(model.model, ctx(), StreamOptions(signal=signal)):
        seen.append(event)
        if event.type == "text_delta" and len(seen) == 5:
            signal.abort("user pressed stop")
    last = seen[-1]
    assert isinstance(last, ErrorEvent) and last.reason == "aborted"
    assert last.error.stop_reason == "aborted" and last.error.error_message == "user pressed stop"
    assert 0 < len(last.error.text) < 400


async def test_abort_during_stall_returns_promptly() -> None:
    model = ScriptedModel([stall(after_chunks=1, seconds=3600)])
    signal = AbortSignal()
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, signal.abort)
    events = await run(model, options=StreamOptions(signal=signal, timeout=None))
    assert isinstance(events[-1], ErrorEvent) and events[-1].reason == "aborted"


async def test_already_aborted_signal_consumes_step() -> None:
    model = ScriptedModel([text("never")])
    signal = AbortSignal()
    signal.abort()
    events = await run(model, options=StreamOptions(signal=signal))
    assert [e.type for e in events] == ["error"] and model.pending == 0


async def test_from_context_sees_the_context() -> None:
    model = ScriptedModel([from_context(lambda c: text(f"you said {c.messages[-1].content}"))])
    assert final(await run(model, ctx("ping"))).text == "you said ping"


async def test_from_context_exception_becomes_error_event() -> None:
    def broken(context: Context) -> object:
        raise KeyError("nope")

    message = final(await run(ScriptedModel([from_context(broken)])))  # type: ignore[arg-type]
    assert message.stop_reason == "error" and "KeyError" in (message.error_message or "")


async def test_scripted_usage_and_prices() -> None:
    priced = Model(id="m", provider="p", api="scripted-priced", input_price=3.0, output_price=15.0)
    model = ScriptedModel([reply(text("hi"), usage=Usage(input=1000, output=100, cache_read=50))], model=priced)
    usage = final(await run(model)).usage
    assert (usage.input, usage.output, usage.cache_read, usage.total) == (1000, 100, 50, 1150)
    assert usage.cost.input == pytest.approx(0.003) and usage.cost.output == pytest.approx(0.0015)


async def test_slow_stream_still_complete() -> None:
    model = ScriptedModel([text("slow words here")], tokens_per_second=2000)
    assert final(await run(model)).text == "slow words here"


async def test_register_makes_registry_serve_the_script() -> None:
    model = ScriptedModel([text("via registry")], api="scripted-test-register").register()
    try:
        assert "scripted-test-register" in known_apis()
        stream_fn = resolve_api(model.model.api)
        events = [e async for e in stream_fn(model.model, ctx(), None)]
        assert final(events).text == "via registry"
    finally:
        model.unregister()
    assert "scripted-test-register" not in known_apis()


async def test_scripted_model_fixture_works_with_nexus_llm_complete(scripted_model: ScriptedModel) -> None:
    from nexus.llm import complete

    scripted_model.append(reply(text("cut short"), stop_reason="length"))
    message = await complete(scripted_model.model, ctx())
    assert message.text == "cut short" and message.stop_reason == "length"
    scripted_model.assert_complete()


async def test_cancelling_the_consumer_ends_with_aborted_not_an_exception() -> None:
    model = ScriptedModel([stall(after_chunks=2, seconds=3600, then=text("never"))])
    seen: list[AssistantMessageEvent] = []
    stalled = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream(model.model, ctx(), StreamOptions(timeout=None)):
            seen.append(event)
            if len(seen) == 2:
                stalled.set()

    task = asyncio.create_task(consume())
    await stalled.wait()
    task.cancel()
    await task  # the stream absorbed the cancellation
    last = seen[-1]
    assert isinstance(last, ErrorEvent) and last.reason == "aborted" and last.error.error_message == "cancelled"
