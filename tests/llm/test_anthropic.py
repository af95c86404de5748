"""The anthropic-messages provider against real Messages API SSE bytes (mock transport)."""

from __future__ import annotations

from typing import Any

from nexus.llm import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    complete,
    get_model,
    stream,
)

from ._helpers import MockHTTP, anthropic_text_events, named_sse

MODEL = get_model("anthropic", "claude-sonnet-4-5")
OPTS = StreamOptions(api_key="sk-ant-test")
CTX = Context(system_prompt="You are terse.", messages=[UserMessage("hi")])


def block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": body}


def stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


async def test_text_usage_cache_and_request_shape(mock_http: MockHTTP) -> None:
    mock_http.sse(named_sse(anthropic_text_events(["Hel", "lo"])))
    events = [e async for e in stream(MODEL, CTX, OPTS)]
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    msg = events[-1].message  # type: ignore[union-attr]
    assert msg.text == "Hello" and msg.stop_reason == "stop" and msg.response_id == "msg_1"
    u = msg.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total) == (12, 7, 1000, 100, 1119)
    expected = (12 * 3 + 7 * 15 + 1000 * 0.3 + 100 * 3.75) / 1e6
    assert abs(u.cost.total - expected) < 1e-12
    req = mock_http.requests[0]
    assert str(req.url) == "https://api.anthropic.com/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-test" and req.headers["anthropic-version"] == "2023-06-01"
    body = mock_http.last_json
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    ]
    assert body["max_tokens"] == 32000 and body["stream"] is True


async def test_thinking_signature_redacted_and_tool_use(mock_http: MockHTTP) -> None:
    start = anthropic_text_events([])[0]
    events = [
        start,
        block_start(0, {"type": "thinking", "thinking": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
        delta(0, {"type": "thinking_delta", "thinking": "check."}),
        delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAh"}),
        stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "ENCRYPTED"}),
        stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {}}),
        delta(2, {"type": "input_json_delta", "partial_json": ""}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"path": "a.'}),
        delta(2, {"type": "input_json_delta", "partial_json": 'txt"}'}),
        stop(2),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    mock_http.sse(named_sse(events))
    got = [e async for e in stream(MODEL, CTX, OPTS)]
    assert [e.type for e in got] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "thinking_start",
        "thinking_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    msg = got[-1].message  # type: ignore[union-attr]
    assert msg.stop_reason == "tool_use"
    assert msg.content == [
        ThinkingContent("Let me check.", signature="EqQBCgIYAh"),
        ThinkingContent("", signature="ENCRYPTED", redacted=True),
        ToolCall("toolu_01", "read", {"path": "a.txt"}),
    ]


async def test_thinking_budget_max_tokens_and_no_temperature(mock_http: MockHTTP) -> None:
    for level, budget in (("minimal", 1024), ("low", 2048), ("medium", 8192), ("high", 16384)):
        mock_http.sse(named_sse(anthropic_text_events(["x"])))
        opts = StreamOptions(api_key="k", thinking=level, max_tokens=4000, temperature=0.7)  # type: ignore[arg-type]
        await complete(MODEL, CTX, opts)
        body = mock_http.last_json
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] == 4000 + budget
        assert "temperature" not in body
    mock_http.sse(named_sse(anthropic_text_events(["x"])))
    await complete(MODEL, CTX, StreamOptions(api_key="k", temperature=0.7, tool_choice="required"))
    assert mock_http.last_json["temperature"] == 0.7 and "thinking" not in mock_http.last_json
    assert "tool_choice" not in mock_http.last_json  # no tools, no tool_choice


async def test_replay_encoding_merges_tool_results_and_marks_last_user_block(mock_http: MockHTTP) -> None:
    mock_http.sse(named_sse(anthropic_text_events(["ok"])))
    image = ImageContent("aGVsbG8=", "image/png")
    history = [
        UserMessage([TextContent("look"), image]),
        AssistantMessage(
            content=[
                ThinkingContent("hmm", signature="sig"),
                TextContent("reading"),
                ToolCall("call|1", "read", {"path": "a"}),
                ToolCall("call|2", "read", {"path": "b"}),
            ],
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            stop_reason="tool_use",
        ),
        ToolResultMessage("call|1", "read", [TextContent("A")]),
        ToolResultMessage("call|2", "read", [TextContent("no such file")], is_error=True),
    ]
    tool = Tool("read", "Read", {"type": "object"})
    await complete(MODEL, Context(messages=history, tools=[tool]), StreamOptions(api_key="k", tool_choice="read"))
    body = mock_http.last_json
    msgs = body["messages"]
    assert msgs[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
    }
    assert msgs[1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "reading"},
        {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "call_2", "name": "read", "input": {"path": "b"}},
    ]
    assert len(msgs) == 3 and msgs[2]["role"] == "user"
    first, second = msgs[2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "A"}]}
    assert second["tool_use_id"] == "call_2" and second["is_error"] is True
    assert second["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in msgs[0]["content"][-1]
    assert body["tools"] == [{"name": "read", "description": "Read", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "tool", "name": "read"}


async def test_error_event_mid_stream_keeps_partial_and_classifies(mock_http: MockHTTP) -> None:
    events = anthropic_text_events(["partial"])[:4]
    events.append(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    mock_http.sse(named_sse(events))
    got = [e async for e in stream(MODEL, CTX, OPTS)]
    last = got[-1]
    assert last.type == "error"
    msg = last.error  # type: ignore[union-attr]
    assert msg.error_kind == "overloaded" and msg.text == "partial" and msg.usage.input == 12
    assert msg.error_message == "overloaded_error: Overloaded"


async def test_http_errors(mock_http: MockHTTP) -> None:
    mock_http.error(529, '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    mock_http.error(
        400,
        '{"type":"error","error":{"type":"invalid_request_error",'
        '"message":"prompt is too long: 210000 tokens > 200000 maximum"}}',
    )
    mock_http.error(401, '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}')
    mock_http.error(403, '{"type":"error","error":{"type":"permission_error","message":"not allowed"}}')
    got = [await complete(MODEL, CTX, OPTS) for _ in range(4)]
    assert [m.error_kind for m in got] == ["overloaded", "context_overflow", "auth_permanent", "auth"]
    assert got[1].error_message == "400 invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum"


async def test_missing_key_names_anthropic_variable(mock_http: MockHTTP) -> None:
    msg = await complete(MODEL, CTX)
    assert msg.error_kind == "auth_permanent" and "ANTHROPIC_API_KEY" in (msg.error_message or "")


async def test_base_url_from_environment(mock_http: MockHTTP, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.example.test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    mock_http.sse(named_sse(anthropic_text_events(["x"])))
    msg = await complete(MODEL, CTX)
    assert msg.stop_reason == "stop"
    assert str(mock_http.requests[0].url) == "https://proxy.example.test/v1/messages"
    assert mock_http.requests[0].headers["x-api-key"] == "sk-env"


async def test_refusal_and_max_tokens_stop_reasons(mock_http: MockHTTP) -> None:
    mock_http.sse(named_sse(anthropic_text_events(["cut"], stop="max_tokens")))
    mock_http.sse(named_sse(anthropic_text_events(["no"], stop="refusal")))
    length = await complete(MODEL, CTX, OPTS)
    refused = await complete(MODEL, CTX, OPTS)
    assert length.stop_reason == "length" and length.text == "cut"
    assert refused.stop_reason == "error" and refused.error_kind == "refusal"
    assert refused.error_message == "the model refused to answer (no explanation given)"


async def test_adaptive_thinking_and_small_output_limit(mock_http: MockHTTP) -> None:
    mock_http.sse(named_sse(anthropic_text_events(["x"])))
    adaptive = Model(id="claude-opus-4-6", provider="anthropic", api="anthropic-messages", reasoning=True)
    await complete(adaptive, CTX, StreamOptions(api_key="k", thinking="minimal"))
    body = mock_http.last_json
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "low"}
    mock_http.sse(named_sse(anthropic_text_events(["x"])))
    small = Model(id="tiny", provider="anthropic", api="anthropic-messages", reasoning=True, max_tokens=4096)
    await complete(small, CTX, StreamOptions(api_key="k", thinking="high"))
    body = mock_http.last_json
    assert body["max_tokens"] == 4096 and body["thinking"]["budget_tokens"] == 3072


async def test_cut_stream_keeps_partial_tool_arguments_raw(mock_http: MockHTTP) -> None:
    events = [
        anthropic_text_events([])[0],
        block_start(0, {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"path": "a'}),
    ]
    mock_http.sse(named_sse(events))
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "error" and msg.error_kind == "network"
    call = msg.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"path": "a'
