"""The decoders against provider streams kept as captures (``tests/llm/captures``), served by FakeProviderServer.

Each capture is built from the provider's documented stream format (or an issue report of
what real streams send) and replayed byte for byte: whole, in 37-byte pieces and in 1-byte
pieces, because where the network splits a stream must not change the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.llm import Context, Model, StreamOptions, UserMessage, stream
from nexus.llm.events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.llm.providers.openai_responses import encode_input
from nexus.llm.types import AssistantMessage, TextContent, ThinkingContent, ToolCall
from nexus.testing import FakeProviderServer
from nexus.testing.steps import replay

CAPTURES = Path(__file__).parent / "captures"
PIECES = [None, 37, 1]
CTX = Context(messages=[UserMessage("hi")])


def _model(api: str, server: FakeProviderServer, **extra: object) -> Model:
    base = server.anthropic_base_url if api == "anthropic-messages" else server.openai_base_url
    return Model(id="captured", provider="captured", api=api, base_url=base, **extra)  # type: ignore[arg-type]


async def _replay(name: str, api: str, pieces: int | None, **extra: object) -> list[AssistantMessageEvent]:
    async with FakeProviderServer(replay(CAPTURES / name, pieces)) as server:
        events = [e async for e in stream(_model(api, server, **extra), CTX, StreamOptions(api_key="sk-test"))]
        server.assert_complete()
    assert [e.type for e in events].count("done") + [e.type for e in events].count("error") == 1
    return events


def _final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent), f"the stream ended with {last.type}"
    return last.message if isinstance(last, DoneEvent) else last.error


# --------------------------------------------------------------------------- 1: Responses in-stream error


@pytest.mark.parametrize("pieces", PIECES)
async def test_responses_nested_error_event_keeps_the_providers_error(pieces: int | None) -> None:
    events = await _replay("openai-responses-insufficient-quota.capture", "openai-responses", pieces)
    msg = _final(events)
    assert isinstance(events[-1], ErrorEvent) and msg.stop_reason == "error"
    assert msg.error_kind == "billing"  # failover disables the profile instead of retrying it
    assert msg.error_message is not None
    assert msg.error_message.startswith("insufficient_quota: You exceeded your current quota")


# --------------------------------------------------------------------------- 2: a restarted Anthropic generation


@pytest.mark.parametrize("pieces", PIECES)
async def test_second_message_start_starts_the_message_over(pieces: int | None) -> None:
    events = await _replay("anthropic-restarted-generation.capture", "anthropic-messages", pieces)
    msg = _final(events)
    assert isinstance(events[-1], DoneEvent) and msg.stop_reason == "tool_use"
    assert msg.response_id == "msg_01Restarted"
    assert msg.content == [
        ThinkingContent("I should read notes.txt first.", signature="EqQBrestartedSig"),
        ToolCall(id="toolu_01Read", name="read", arguments={"path": "notes.txt"}),
    ]
    assert msg.usage.input == 415 and msg.usage.output == 58  # the new generation's usage, not a sum
    assert [e.tool_call.id for e in events if isinstance(e, ToolCallEndEvent)] == ["toolu_01Read"]


@pytest.mark.parametrize("pieces", PIECES)
async def test_a_restart_drops_the_abandoned_tool_call(pieces: int | None) -> None:
    events = await _replay("anthropic-restart-drops-tool-call.capture", "anthropic-messages", pieces)
    msg = _final(events)
    assert msg.stop_reason == "stop" and msg.tool_calls == []
    assert msg.content == [TextContent("I will not change any file.")]


@pytest.mark.parametrize("pieces", PIECES)
async def test_a_tool_call_never_closed_is_kept_raw_and_gets_no_end_event(pieces: int | None) -> None:
    events = await _replay("anthropic-unfinished-tool-call.capture", "anthropic-messages", pieces)
    msg = _final(events)
    (call,) = msg.tool_calls
    # the text even parses, but the provider never closed the block: not trusted, not runnable as {}
    assert call.arguments == {} and call.raw_arguments == '{"path": "a.txt", "content": "x"}'
    assert not any(isinstance(e, ToolCallEndEvent) for e in events)


# --------------------------------------------------------------------------- 3: reasoning counted beside the output


@pytest.mark.parametrize("pieces", PIECES)
async def test_xai_reasoning_outside_completion_tokens_is_added_to_output(pieces: int | None) -> None:
    events = await _replay(
        "openai-completions-xai-reasoning-usage.capture", "openai-completions", pieces, output_price=2.5
    )
    usage = _final(events).usage
    assert (usage.input, usage.output, usage.reasoning) == (32, 9 + 94, 94)
    assert usage.total == 135  # the provider's own total_tokens
    assert usage.cost.output == pytest.approx(2.5 * 103 / 1e6)


async def test_openai_reasoning_inside_completion_tokens_is_not_added_twice() -> None:
    events = await _replay(
        "openai-completions-openai-reasoning-usage.capture", "openai-completions", None, output_price=2.5
    )
    usage = _final(events).usage
    assert (usage.input, usage.output, usage.reasoning, usage.total) == (32, 103, 94, 135)


# --------------------------------------------------------------------------- 4: text sent in parts stays apart


@pytest.mark.parametrize("pieces", PIECES)
async def test_summary_parts_and_output_messages_stay_apart(pieces: int | None) -> None:
    events = await _replay("openai-responses-summary-parts-and-phases.capture", "openai-responses", pieces)
    msg = _final(events)
    thinking, first, second = msg.content
    assert isinstance(thinking, ThinkingContent) and isinstance(first, TextContent) and isinstance(second, TextContent)
    assert thinking.thinking.startswith("**Tracing the Mission burrito**\n\nThe user asks")
    assert thinking.thinking.endswith(
        "Mission District.\n\n**Exploring burrito origins**\n\nTaquerias there made it large in the 1960s."
    )
    assert first.text == "Let me recall the history of the Mission burrito."
    assert second.text == "\n\nIt comes from the Mission District of San Francisco."
    assert (
        msg.text
        == "Let me recall the history of the Mission burrito.\n\nIt comes from the Mission District of San Francisco."
    )
    # a renderer that prints the deltas shows the same separation
    assert "".join(e.delta for e in events if isinstance(e, TextDeltaEvent)) == msg.text
    assert "".join(e.delta for e in events if isinstance(e, ThinkingDeltaEvent)) == thinking.thinking


async def test_separated_output_messages_replay_as_they_were_sent() -> None:
    events = await _replay("openai-responses-summary-parts-and-phases.capture", "openai-responses", None)
    msg = _final(events)
    model = Model(id="captured", provider="captured", api="openai-responses")
    sent = [
        item
        for item in encode_input(model, Context(messages=[UserMessage("q"), msg]))
        if item.get("role") == "assistant"
    ]
    assert [item["content"][0]["text"] for item in sent] == [
        "Let me recall the history of the Mission burrito.",
        "It comes from the Mission District of San Francisco.",
    ]


# --------------------------------------------------------------------------- 5: refusals keep their explanation


@pytest.mark.parametrize("pieces", PIECES)
async def test_anthropic_refusal_keeps_the_explanation(pieces: int | None) -> None:
    events = await _replay("anthropic-refusal.capture", "anthropic-messages", pieces)
    msg = _final(events)
    assert isinstance(events[-1], ErrorEvent) and msg.stop_reason == "error" and msg.error_kind == "refusal"
    assert msg.error_message == (
        "the model refused to answer: cyber: The request asks for working malware that targets a third party."
    )
    assert msg.content == [TextContent("I can't help with")]  # what arrived before is kept


@pytest.mark.parametrize(
    ("name", "api", "expected"),
    [
        (
            "openai-completions-refusal.capture",
            "openai-completions",
            "the model refused to answer: I'm sorry, I can't assist with that request.",
        ),
        (
            "openai-responses-refusal.capture",
            "openai-responses",
            "the model refused to answer: I'm sorry, but I can't help with that.",
        ),
        (
            "openai-completions-content-filter.capture",
            "openai-completions",
            "the provider's content filter stopped the response: violence (high)",
        ),
    ],
)
async def test_openai_refusals_and_content_filter_have_their_own_kind(name: str, api: str, expected: str) -> None:
    for pieces in PIECES:
        msg = _final(await _replay(name, api, pieces))
        assert (msg.stop_reason, msg.error_kind, msg.error_message) == ("error", "refusal", expected)
        assert msg.text == ("Here is how" if "filter" in name else "")  # the refusal is not answer text


# --------------------------------------------------------------------------- 6: parallel tool calls by index


@pytest.mark.parametrize("pieces", PIECES)
async def test_parallel_tool_calls_interleaved_by_index(pieces: int | None) -> None:
    events = await _replay("openai-completions-parallel-tool-calls.capture", "openai-completions", pieces)
    msg = _final(events)
    assert msg.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [
        ("call_Weather0001", "get_weather", {"city": "Tokyo"}),
        ("call_Weather0002", "get_weather", {"city": "Paris", "unit": "c"}),
    ]
    assert [e.content_index for e in events if isinstance(e, ToolCallStartEvent)] == [0, 1]
    by_block: dict[int, str] = {}
    for e in events:
        if isinstance(e, ToolCallDeltaEvent):
            by_block[e.content_index] = by_block.get(e.content_index, "") + e.delta
    assert by_block == {0: '{"city": "Tokyo"}', 1: '{"city": "Paris", "unit": "c"}'}
    ends = [(e.content_index, e.tool_call.id) for e in events if isinstance(e, ToolCallEndEvent)]
    assert ends == [(0, "call_Weather0001"), (1, "call_Weather0002")]


def test_every_capture_here_is_used_by_a_test() -> None:
    source = Path(__file__).read_text(encoding="utf-8") + (Path(__file__).parent / "test_captures_agent.py").read_text(
        encoding="utf-8"
    )
    unused = [p.name for p in CAPTURES.glob("*.capture") if p.name not in source]
    assert unused == []
