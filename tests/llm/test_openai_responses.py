"""The openai-responses provider against real Responses API SSE bytes (mock transport)."""

from __future__ import annotations

import json
from typing import Any

from nexus.llm import (
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    complete,
    stream,
)

from ._helpers import MockHTTP, named_sse

MODEL = Model(
    id="gpt-5", provider="openai", api="openai-responses", base_url="https://api.openai.com/v1", reasoning=True
)
OPTS = StreamOptions(api_key="sk-test")
CTX = Context(system_prompt="sys", messages=[UserMessage("hi")])


def ev(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


REASONING_ITEM = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}


def full_response() -> bytes:
    return named_sse(
        [
            ev("response.created", response={"id": "resp_1", "status": "in_progress"}),
            ev("response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs_1"}),
            ev("response.reasoning_summary_text.delta", output_index=0, delta="Thinking"),
            ev("response.output_item.done", output_index=0, item=REASONING_ITEM),
            ev(
                "response.output_item.added",
                output_index=1,
                item={"type": "message", "id": "msg_1", "role": "assistant"},
            ),
            ev("response.output_text.delta", output_index=1, content_index=0, delta="Hi "),
            ev("response.output_text.delta", output_index=1, content_index=0, delta="there"),
            ev("response.output_text.done", output_index=1, content_index=0, text="Hi there"),
            ev("response.output_item.done", output_index=1, item={"type": "message"}),
            ev(
                "response.output_item.added",
                output_index=2,
                item={"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "read", "arguments": ""},
            ),
            ev("response.function_call_arguments.delta", output_index=2, item_id="fc_1", delta='{"path":'),
            ev("response.function_call_arguments.delta", output_index=2, item_id="fc_1", delta='"x"}'),
            ev("response.function_call_arguments.done", output_index=2, item_id="fc_1", arguments='{"path":"x"}'),
            ev(
                "response.output_item.done", output_index=2, item={"type": "function_call", "arguments": '{"path":"x"}'}
            ),
            ev(
                "response.completed",
                response={
                    "id": "resp_1",
                    "status": "completed",
                    "usage": {
                        "input_tokens": 100,
                        "input_tokens_details": {"cached_tokens": 60},
                        "output_tokens": 30,
                        "output_tokens_details": {"reasoning_tokens": 20},
                        "total_tokens": 130,
                    },
                },
            ),
        ]
    )


async def test_reasoning_text_and_function_call(mock_http: MockHTTP) -> None:
    mock_http.sse(full_response())
    events = [e async for e in stream(MODEL, CTX, StreamOptions(api_key="k", thinking="medium"))]
    assert [e.type for e in events] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    msg = events[-1].message  # type: ignore[union-attr]
    assert msg.stop_reason == "tool_use" and msg.response_id == "resp_1"
    thinking = msg.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Thinking"
    assert json.loads(thinking.signature or "{}") == REASONING_ITEM
    assert msg.content[1:] == [TextContent("Hi there"), ToolCall("call_9", "read", {"path": "x"})]
    assert (msg.usage.input, msg.usage.cache_read, msg.usage.output, msg.usage.reasoning) == (40, 60, 30, 20)
    body = mock_http.last_json
    assert str(mock_http.requests[0].url) == "https://api.openai.com/v1/responses"
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"] and body["store"] is False
    assert body["instructions"] == "sys"
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


async def test_replay_sends_reasoning_items_back_to_same_model(mock_http: MockHTTP) -> None:
    mock_http.sse(full_response())
    first = await complete(MODEL, CTX, OPTS)
    history = [*CTX.messages, first, ToolResultMessage("call_9", "read", [TextContent("contents")])]
    mock_http.sse(full_response())
    tool = Tool("read", "Read", {"type": "object"})
    await complete(MODEL, Context(messages=history, tools=[tool]), StreamOptions(api_key="k", tool_choice="read"))
    body = mock_http.last_json
    assert body["input"][1] == REASONING_ITEM
    assert body["input"][2] == {"role": "assistant", "content": [{"type": "output_text", "text": "Hi there"}]}
    assert body["input"][3] == {
        "type": "function_call",
        "call_id": "call_9",
        "name": "read",
        "arguments": '{"path": "x"}',
    }
    assert body["input"][4] == {"type": "function_call_output", "call_id": "call_9", "output": "contents"}
    assert body["tools"][0]["name"] == "read" and body["tool_choice"] == {"type": "function", "name": "read"}


async def test_failed_response_is_classified(mock_http: MockHTTP) -> None:
    mock_http.sse(
        named_sse(
            [
                ev("response.created", response={"id": "r"}),
                ev(
                    "response.failed",
                    response={"status": "failed", "error": {"code": "context_length_exceeded", "message": "too long"}},
                ),
            ]
        )
    )
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "error" and msg.error_kind == "context_overflow"


async def test_incomplete_response_is_length(mock_http: MockHTTP) -> None:
    mock_http.sse(
        named_sse(
            [
                ev("response.output_item.added", output_index=0, item={"type": "message"}),
                ev("response.output_text.delta", output_index=0, delta="abc"),
                ev(
                    "response.incomplete",
                    response={"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
                ),
            ]
        )
    )
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "length" and msg.text == "abc"


async def test_other_models_thinking_is_replayed_as_text(mock_http: MockHTTP) -> None:
    mock_http.sse(full_response())
    other = AssistantMessage(
        content=[ThinkingContent("pondering", signature="anthropic-sig"), TextContent("answer")],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
    )
    await complete(MODEL, Context(messages=[UserMessage("q"), other, UserMessage("more")]), OPTS)
    items = mock_http.last_json["input"]
    assert items[1] == {"role": "assistant", "content": [{"type": "output_text", "text": "pondering"}]}
    assert items[2] == {"role": "assistant", "content": [{"type": "output_text", "text": "answer"}]}


async def test_error_event_and_cut_stream(mock_http: MockHTTP) -> None:
    mock_http.sse(named_sse([ev("error", code="rate_limit_exceeded", message="Rate limit reached, try again in 2s")]))
    mock_http.sse(
        named_sse(
            [
                ev("response.output_item.added", output_index=0, item={"type": "message"}),
                ev("response.output_text.delta", output_index=0, delta="half"),
            ]
        )
    )
    limited = await complete(MODEL, CTX, OPTS)
    assert limited.error_kind == "rate_limit" and limited.retry_after == 2.0
    cut = await complete(MODEL, CTX, OPTS)
    assert cut.stop_reason == "error" and cut.text == "half"


async def test_a_refusal_part_without_deltas_is_still_a_refusal(mock_http: MockHTTP) -> None:
    refused = {"type": "message", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    mock_http.sse(
        named_sse(
            [
                ev("response.output_item.added", output_index=0, item={"type": "message", "content": []}),
                ev("response.output_item.done", output_index=0, item=refused),
                ev("response.completed", response={"status": "completed"}),
            ]
        )
    )
    msg = await complete(MODEL, CTX, OPTS)
    assert (msg.stop_reason, msg.error_kind) == ("error", "refusal")
    assert msg.error_message == "the model refused to answer: I can't help with that."


async def test_a_content_filtered_response_is_a_refusal(mock_http: MockHTTP) -> None:
    incomplete = {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}}
    mock_http.sse(
        named_sse(
            [
                ev("response.output_item.added", output_index=0, item={"type": "message"}),
                ev("response.output_text.delta", output_index=0, delta="Here is"),
                ev("response.incomplete", response=incomplete),
            ]
        )
    )
    msg = await complete(MODEL, CTX, OPTS)
    assert (msg.stop_reason, msg.error_kind, msg.text) == ("error", "refusal", "Here is")
    assert msg.error_message == "the provider's content filter stopped the response (no explanation given)"


async def test_reasoning_reported_beside_output_tokens_is_added(mock_http: MockHTTP) -> None:
    beside = {"input_tokens": 10, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 20}}
    inside = {"input_tokens": 10, "output_tokens": 25, "output_tokens_details": {"reasoning_tokens": 20}}
    for usage in ({**beside, "total_tokens": 35}, {**inside, "total_tokens": 35}):
        mock_http.sse(named_sse([ev("response.completed", response={"status": "completed", "usage": usage})]))
        msg = await complete(MODEL, CTX, OPTS)
        assert (msg.usage.output, msg.usage.reasoning, msg.usage.total) == (25, 20, 35)
