"""JSON round-trip of every message and content type (the ledger depends on it)."""

from __future__ import annotations

import pytest

from nexus.llm import ErrorEvent, list_models
from nexus.llm.serde import (
    MessageFormatError,
    event_from_json,
    event_to_json,
    message_from_json,
    message_to_json,
    model_from_dict,
    model_from_json,
    model_to_dict,
    model_to_json,
)
from nexus.llm.types import (
    AssistantMessage,
    Context,
    Cost,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from nexus.testing import ScriptedModel, steps

MESSAGES: list[Message] = [
    UserMessage("hello", timestamp=1),
    UserMessage([TextContent("look"), ImageContent("aGVsbG8=", "image/png")], timestamp=2),
    AssistantMessage(
        content=[
            ThinkingContent("hmm", signature="sig"),
            ThinkingContent("", signature="opaque", redacted=True),
            TextContent("answer"),
            ToolCall("call_1", "read", {"path": "a.txt"}),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(10, 5, 3, 2, 1, 20, Cost(0.1, 0.2, 0.01, 0.02, 0.33)),
        stop_reason="tool_use",
        timestamp=3,
    ),
    AssistantMessage(stop_reason="error", error_message="boom", error_kind="rate_limit", retry_after=2.0, timestamp=4),
    AssistantMessage([TextContent("guessed")], usage=Usage(12, 2, total=14, estimated=True), timestamp=6),
    ToolResultMessage("call_1", "read", [TextContent("data")], is_error=True, details={"lines": 3}, timestamp=5),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_round_trip(message: Message) -> None:
    assert message_from_json(message_to_json(message)) == message


def test_unknown_role_is_named() -> None:
    with pytest.raises(MessageFormatError, match="unknown role 'system'"):
        message_from_json('{"role": "system", "content": "x"}')


def test_bad_block_is_named() -> None:
    with pytest.raises(MessageFormatError, match="unknown block type 'video'"):
        message_from_json('{"role": "user", "content": [{"type": "video"}]}')


def test_invalid_json_is_reported() -> None:
    with pytest.raises(MessageFormatError, match="not valid JSON"):
        message_from_json("{")


# --------------------------------------------------------------------------- models


def test_every_catalog_model_round_trips() -> None:
    models = list_models()
    assert len(models) > 20
    for model in models:
        assert model_from_json(model_to_json(model)) == model
        assert model_from_dict(model_to_dict(model)) == model


def test_model_with_headers_round_trips_in_order() -> None:
    model = Model(
        id="m",
        provider="acme",
        api="openai-completions",
        base_url="https://acme.test/v1",
        context_window=32_000,
        max_tokens=4_000,
        input_price=1.5,
        output_price=2.5,
        cache_read_price=0.1,
        cache_write_price=0.2,
        reasoning=True,
        image_input=True,
        headers=(("x-z", "1"), ("x-a", "2")),  # not sorted: equality compares the tuple
    )
    back = model_from_json(model_to_json(model))
    assert back == model and back.headers == (("x-z", "1"), ("x-a", "2"))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ('{"id": "m", "provider": "p", "api": "a", "colour": "red"}', "unknown field.*colour"),
        ('{"id": "m", "provider": "p"}', "field 'api' must be a string"),
        ("[1, 2]", "expected an object, got list"),
        ("{", "not valid JSON"),
    ],
)
def test_bad_model_json_is_named(data: str, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        model_from_json(data)


# --------------------------------------------------------------------------- stream events


async def test_every_stream_event_round_trips() -> None:
    scripted = ScriptedModel(
        [steps.reply(steps.thinking("plan"), steps.text("hello world, " * 3), steps.tool_call("read", {"p": 1}))],
        chunk_chars=5,
    )
    events = [e async for e in scripted.stream(scripted.model, Context(messages=[UserMessage("hi")]))]
    seen = {e.type for e in events}
    assert seen == {
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    }
    error = ErrorEvent("aborted", AssistantMessage(stop_reason="aborted", error_message="user", timestamp=9))
    for event in [*events, error]:
        text = event_to_json(event)
        back = event_from_json(text)
        assert type(back) is type(event) and back == event, event.type
        assert event_to_json(back) == text


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ('{"type": "explode"}', "unknown type 'explode'"),
        ('{"type": "text_delta", "content_index": 0, "delta": "x"}', "missing field 'partial'"),
        ('{"type": "done", "reason": "stop", "message": {"role": "user", "content": "x"}}', "assistant message"),
        ('"done"', "expected an object"),
    ],
)
def test_bad_event_json_is_named(data: str, match: str) -> None:
    with pytest.raises(MessageFormatError, match=match):
        event_from_json(data)


def test_usage_estimated_is_stored_only_when_true() -> None:
    estimated = AssistantMessage(usage=Usage(12, 2, total=14, estimated=True), timestamp=1)
    assert '"estimated":true' in message_to_json(estimated).replace(" ", "")
    assert "estimated" not in message_to_json(AssistantMessage(usage=Usage(12, 2, total=14), timestamp=1))
    decoded = message_from_json(message_to_json(estimated))
    assert isinstance(decoded, AssistantMessage) and decoded.usage.estimated
