"""The openai-completions provider against real chat-completions SSE bytes (mock transport)."""

from __future__ import annotations

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

from ._helpers import MockHTTP, oa_chunk, oa_usage, openai_sse

MODEL = Model(
    id="gpt-test",
    provider="openai",
    api="openai-completions",
    base_url="https://api.example.test/v1",
    input_price=2.0,
    output_price=8.0,
    cache_read_price=0.5,
)
OPTS = StreamOptions(api_key="sk-test")
CTX = Context(system_prompt="be brief", messages=[UserMessage("hi")])
TOOL = Tool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})


async def events_of(model: Model = MODEL, context: Context = CTX, options: StreamOptions = OPTS) -> list[object]:
    return [e async for e in stream(model, context, options)]


async def test_text_stream_events_usage_and_cost(mock_http: MockHTTP) -> None:
    mock_http.sse(
        openai_sse(
            [
                oa_chunk({"role": "assistant", "content": ""}),
                oa_chunk({"content": "Hel"}),
                oa_chunk({"content": "lo"}),
                oa_chunk({}, "stop"),
                oa_usage(prompt=1000, completion=10, cached=400),
            ]
        )
    )
    events = await events_of()
    types = [e.type for e in events]  # type: ignore[attr-defined]
    assert types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert [e.delta for e in events if e.type == "text_delta"] == ["Hel", "lo"]  # type: ignore[attr-defined]
    msg = events[-1].message  # type: ignore[attr-defined]
    assert msg.text == "Hello" and msg.stop_reason == "stop" and msg.response_id == "chatcmpl-1"
    assert (msg.usage.input, msg.usage.cache_read, msg.usage.output, msg.usage.total) == (600, 400, 10, 1010)
    assert abs(msg.usage.cost.total - (600 * 2 + 400 * 0.5 + 10 * 8) / 1e6) < 1e-12
    req = mock_http.requests[0]
    assert str(req.url) == "https://api.example.test/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    body = mock_http.last_json
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


async def test_tool_call_arguments_streamed_as_deltas(mock_http: MockHTTP) -> None:
    call = {"index": 0, "id": "call_abc", "type": "function", "function": {"name": "read", "arguments": ""}}
    mock_http.sse(
        openai_sse(
            [
                oa_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
                oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a.txt"}'}}]}),
                oa_chunk({}, "tool_calls"),
            ]
        )
    )
    events = await events_of(context=Context(messages=[UserMessage("read a.txt")], tools=[TOOL]))
    types = [e.type for e in events]  # type: ignore[attr-defined]
    assert types == ["start", "toolcall_start", "toolcall_delta", "toolcall_delta", "toolcall_end", "done"]
    end = events[4]
    assert end.tool_call == ToolCall(id="call_abc", name="read", arguments={"path": "a.txt"})  # type: ignore[attr-defined]
    assert events[-1].message.stop_reason == "tool_use"  # type: ignore[attr-defined]
    assert mock_http.last_json["tools"][0] == {
        "type": "function",
        "function": {"name": "read", "description": "Read a file", "parameters": TOOL.parameters},
    }


async def test_invalid_tool_arguments_keep_raw_text(mock_http: MockHTTP) -> None:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": oops'}}
    mock_http.sse(openai_sse([oa_chunk({"tool_calls": [call]}), oa_chunk({}, "tool_calls")]))
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "tool_use"
    assert msg.tool_calls[0].arguments == {} and msg.tool_calls[0].raw_arguments == '{"path": oops'


async def test_reasoning_content_becomes_thinking_then_text(mock_http: MockHTTP) -> None:
    mock_http.sse(
        openai_sse(
            [
                oa_chunk({"reasoning_content": "let me "}),
                oa_chunk({"reasoning_content": "think"}),
                oa_chunk({"content": "42"}),
                oa_chunk({}, "stop"),
            ]
        )
    )
    events = await events_of()
    types = [e.type for e in events]  # type: ignore[attr-defined]
    assert types[:5] == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_end"]
    msg = events[-1].message  # type: ignore[attr-defined]
    assert msg.content == [ThinkingContent("let me think"), TextContent("42")]


async def test_length_stop_and_done_without_done_marker(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "abc"}), oa_chunk({}, "length")], done=False))
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "length" and msg.text == "abc"


async def test_stream_cut_before_finish_is_an_error_with_partial(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "partial "}), oa_chunk({"content": "text"})], done=False))
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "error" and msg.error_kind == "network"
    assert msg.text == "partial text"
    assert "closed before the response finished" in (msg.error_message or "")


async def test_malformed_sse_data_is_a_classified_error(mock_http: MockHTTP) -> None:
    mock_http.sse(b'data: {"choices": [{"delta": {"content": "ok"}}]}\n\ndata: {"choices": [{"delta": \n\n')
    events = await events_of()
    last = events[-1]
    assert last.type == "error" and last.reason == "error"  # type: ignore[attr-defined]
    msg = last.error  # type: ignore[attr-defined]
    assert msg.error_kind == "unknown" and "malformed SSE data" in msg.error_message
    assert msg.text == "ok"


async def test_error_object_inside_the_stream(mock_http: MockHTTP) -> None:
    err = {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}
    mock_http.sse(openai_sse([oa_chunk({"content": "a"}), err], done=False))
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "error" and msg.error_kind == "rate_limit"


async def test_content_filter_finish_is_an_error(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "a"}), oa_chunk({}, "content_filter")]))
    msg = await complete(MODEL, CTX, OPTS)
    assert msg.stop_reason == "error" and msg.error_kind == "refusal"
    assert msg.error_message == "the provider's content filter stopped the response (no explanation given)"


async def test_http_errors_are_classified_with_retry_after(mock_http: MockHTTP) -> None:
    mock_http.error(401, '{"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}')
    mock_http.error(429, '{"error": {"message": "Rate limit exceeded"}}', {"retry-after": "7"})
    mock_http.error(429, '{"error": {"message": "slow down"}}', {"retry-after-ms": "1500"})
    mock_http.error(502, "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>")
    mock_http.error(500, "upstream exploded, not json")
    mock_http.error(400, '{"error": {"message": "This model\'s maximum context length is 128000 tokens."}}')
    results = [await complete(MODEL, CTX, OPTS) for _ in range(6)]
    assert [m.error_kind for m in results] == [
        "auth_permanent",
        "rate_limit",
        "rate_limit",
        "timeout",
        "timeout",
        "context_overflow",
    ]
    assert results[1].retry_after == 7.0 and results[2].retry_after == 1.5
    assert results[3].error_message == "502 HTML error page: 502 Bad Gateway"
    assert results[4].error_message == "500 upstream exploded, not json"
    assert all(m.stop_reason == "error" for m in results)


async def test_missing_key_is_an_auth_error_naming_the_variable(mock_http: MockHTTP) -> None:
    msg = await complete(get_model("openai", "gpt-4o"), CTX)
    assert msg.stop_reason == "error" and msg.error_kind == "auth_permanent"  # no key: retrying cannot help
    assert "OPENAI_API_KEY" in (msg.error_message or "")
    assert mock_http.requests == []


async def test_keys_and_base_url_from_environment(mock_http: MockHTTP, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GROQ_API_KEY", "gsk-env")
    monkeypatch.setenv("GROQ_BASE_URL", "https://groq.example.test/openai/v1/")
    mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
    msg = await complete(get_model("groq", "llama-3.3-70b-versatile"), CTX)
    assert msg.stop_reason == "stop"
    req = mock_http.requests[0]
    assert str(req.url) == "https://groq.example.test/openai/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer gsk-env"


async def test_local_base_url_needs_no_key(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
    model = Model(id="qwen", provider="mylocal", api="openai-completions", base_url="http://127.0.0.1:9/v1")
    msg = await complete(model, CTX)
    assert msg.stop_reason == "stop"
    assert "authorization" not in mock_http.requests[0].headers


async def test_replayed_payload_shape(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
    history = [
        UserMessage("read it"),
        AssistantMessage(
            content=[ToolCall("call_1", "read", {"path": "a"})],
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            stop_reason="tool_use",
        ),
        ToolResultMessage("call_1", "read", [TextContent("file body")]),
    ]
    reasoning = Model(**{**{f: getattr(MODEL, f) for f in MODEL.__dataclass_fields__}, "reasoning": True})
    options = StreamOptions(api_key="k", tool_choice="read", thinking="high", max_tokens=100, temperature=0.2)
    await complete(reasoning, Context(messages=history, tools=[TOOL]), options)
    body = mock_http.last_json
    assistant = body["messages"][1]
    assert assistant["content"] == ""  # never null: llama.cpp rejects null content
    assert assistant["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"path": "a"}'}
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "file body"}
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read"}}
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 100 and body["temperature"] == 0.2


async def test_tool_choice_keywords_and_max_tokens_field_for_compatible_servers(mock_http: MockHTTP) -> None:
    model = Model(id="m", provider="together", api="openai-completions", base_url="https://t.example/v1")
    for choice in ("auto", "none", "required"):
        mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
        opts = StreamOptions(api_key="k", max_tokens=5, tool_choice=choice)
        await complete(model, Context(messages=[UserMessage("q")], tools=[TOOL]), opts)
        assert mock_http.last_json["tool_choice"] == choice
        assert mock_http.last_json["max_tokens"] == 5 and "max_completion_tokens" not in mock_http.last_json
    mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
    await complete(model, Context(messages=[UserMessage("q")]), StreamOptions(api_key="k", thinking="high"))
    assert "reasoning_effort" not in mock_http.last_json  # model is not flagged as reasoning
    assert "tools" not in mock_http.last_json


async def test_lone_surrogates_in_history_do_not_break_the_request(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
    msg = await complete(MODEL, Context(messages=[UserMessage("bad \ud800 text")]), OPTS)
    assert msg.stop_reason == "stop"
    assert mock_http.last_json["messages"][0]["content"] == "bad ? text"


async def test_tool_calls_without_index_are_told_apart_by_id(mock_http: MockHTTP) -> None:
    first = {"id": "a1", "type": "function", "function": {"name": "read", "arguments": '{"path": "x"}'}}
    second = {"id": "b2", "type": "function", "function": {"name": "read", "arguments": '{"path": "y"}'}}
    mock_http.sse(openai_sse([oa_chunk({"tool_calls": [first, second]}), oa_chunk({}, "tool_calls")]))
    msg = await complete(MODEL, CTX, OPTS)
    assert [(c.id, c.arguments) for c in msg.tool_calls] == [("a1", {"path": "x"}), ("b2", {"path": "y"})]


async def test_images_in_user_content_and_tool_results(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": "x"}), oa_chunk({}, "stop")]))
    image = ImageContent("iVBOR", "image/png")
    history = [
        UserMessage([TextContent("what is this?"), image]),
        AssistantMessage(
            content=[ToolCall("c1", "screenshot", {})],
            api=MODEL.api,
            provider=MODEL.provider,
            model=MODEL.id,
            stop_reason="tool_use",
        ),
        ToolResultMessage("c1", "screenshot", [TextContent("taken"), image]),
    ]
    await complete(MODEL, Context(messages=history), OPTS)
    msgs = mock_http.last_json["messages"]
    url = {"url": "data:image/png;base64,iVBOR"}
    assert msgs[0]["content"] == [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": url}]
    assert msgs[2] == {"role": "tool", "tool_call_id": "c1", "content": "taken"}
    assert msgs[3]["role"] == "user" and msgs[3]["content"][1] == {"type": "image_url", "image_url": url}
