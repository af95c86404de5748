"""Bad provider answers on every HTTP API: each ends in exactly one classified error event, never an exception."""

from __future__ import annotations

import httpx
import pytest

from nexus.llm import AssistantMessageEvent, Context, Model, StreamOptions, Tool, ToolCall, UserMessage, stream
from nexus.llm.providers._tools import finish_tool_call

from ._helpers import MockHTTP, named_sse, oa_chunk, openai_sse

APIS = ["openai-completions", "anthropic-messages", "openai-responses"]
CTX = Context(messages=[UserMessage("hi")], tools=[Tool("read", "Read", {"type": "object"})])
OPTS = StreamOptions(api_key="k")


def _model(api: str) -> Model:
    return Model(id="m", provider="acme", api=api, base_url="https://acme.test/v1")


async def _events(api: str) -> list[AssistantMessageEvent]:
    return [e async for e in stream(_model(api), CTX, OPTS)]


def _final(events: list[AssistantMessageEvent]) -> tuple[str, str, str]:
    terminal = [e for e in events if e.type in ("done", "error")]
    assert len(terminal) == 1 and terminal[0] is events[-1]
    last = events[-1]
    assert last.type == "error"
    msg = last.error
    assert msg.stop_reason == "error" and msg.error_kind is not None and msg.error_message
    return msg.error_kind, msg.error_message, msg.text


@pytest.mark.parametrize("api", APIS)
async def test_html_page_with_status_200_is_named(api: str, mock_http: MockHTTP) -> None:
    page = b"<html>\n\n<head><title>Sign in to the proxy</title></head>\n\n<body>login</body></html>"
    mock_http.add(httpx.Response(200, content=page, headers={"content-type": "text/html; charset=utf-8"}))
    kind, message, _ = _final(await _events(api))
    assert "instead of an event stream" in message and "Sign in to the proxy" in message
    assert kind == "unknown"


@pytest.mark.parametrize("api", APIS)
async def test_json_error_with_status_200_is_classified(api: str, mock_http: MockHTTP) -> None:
    body = {"error": {"message": "Rate limit reached, please try again in 2s", "type": "requests"}}
    mock_http.add(httpx.Response(200, json=body))
    kind, message, _ = _final(await _events(api))
    assert kind == "rate_limit" and "application/json" in message and "Rate limit reached" in message
    assert mock_http.requests  # the request was made; the answer was not a stream


@pytest.mark.parametrize("api", APIS)
async def test_non_json_error_body_is_classified(api: str, mock_http: MockHTTP) -> None:
    mock_http.error(503, "upstream connect error or disconnect/reset before headers. reset reason: overflow")
    kind, message, _ = _final(await _events(api))
    assert kind == "timeout" and message.startswith("503 upstream connect error")


@pytest.mark.parametrize("api", APIS)
async def test_html_502_is_classified(api: str, mock_http: MockHTTP) -> None:
    page = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
    mock_http.add(httpx.Response(502, content=page.encode(), headers={"content-type": "text/html"}))
    kind, message, _ = _final(await _events(api))
    assert (kind, message) == ("timeout", "502 HTML error page: 502 Bad Gateway")


@pytest.mark.parametrize("api", APIS)
async def test_json_of_the_wrong_shape_is_reported_as_malformed_data(api: str, mock_http: MockHTTP) -> None:
    # valid JSON, but a string where the decoder expects an object
    if api == "openai-completions":
        body = b'data: {"choices": "oops"}\n\n'
    elif api == "anthropic-messages":
        body = b'event: content_block_start\ndata: {"type": "content_block_start", "index": "x"}\n\n'
    else:
        body = b'event: response.output_item.added\ndata: {"type": "response.output_item.added", "item": 5}\n\n'
    mock_http.sse(body)
    kind, message, _ = _final(await _events(api))
    assert kind == "unknown" and message.startswith("malformed SSE data from provider"), message
    assert "oops" in message or '"x"' in message or "5" in message


@pytest.mark.parametrize("api", APIS)
async def test_malformed_json_after_some_text_keeps_the_text(api: str, mock_http: MockHTTP) -> None:
    if api == "openai-completions":
        good = openai_sse([oa_chunk({"content": "partial"})], done=False)
    elif api == "anthropic-messages":
        good = named_sse(
            [
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial"}},
                ),
            ]
        )
    else:
        good = named_sse(
            [
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}},
                ),
                (
                    "response.output_text.delta",
                    {"type": "response.output_text.delta", "output_index": 0, "delta": "partial"},
                ),
            ]
        )
    mock_http.sse(good + b'data: {"type": "content_block_delta", "delta": \n\n')
    kind, message, text = _final(await _events(api))
    assert kind == "unknown" and "malformed SSE data" in message and text == "partial"


@pytest.mark.parametrize("api", APIS)
async def test_invalid_tool_call_json_is_kept_raw_for_the_tool_layer(api: str, mock_http: MockHTTP) -> None:
    bad = '{"path": "a.txt",'  # truncated JSON, the stream itself finished normally
    if api == "openai-completions":
        call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": bad}}
        mock_http.sse(openai_sse([oa_chunk({"tool_calls": [call]}), oa_chunk({}, "tool_calls")]))
    elif api == "anthropic-messages":
        start = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}
        mock_http.sse(
            named_sse(
                [
                    ("message_start", {"type": "message_start", "message": {"id": "msg", "usage": {}}}),
                    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": bad},
                        },
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
            )
        )
    else:
        item = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": ""}
        done_item = {**item, "arguments": bad}
        mock_http.sse(
            named_sse(
                [
                    (
                        "response.output_item.added",
                        {"type": "response.output_item.added", "output_index": 0, "item": item},
                    ),
                    (
                        "response.output_item.done",
                        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
                    ),
                    ("response.completed", {"type": "response.completed", "response": {"status": "completed"}}),
                ]
            )
        )
    events = await _events(api)
    assert [e.type for e in events].count("done") == 1 and events[-1].type == "done"
    msg = events[-1].message
    assert msg.stop_reason == "tool_use"
    call = msg.tool_calls[0]
    assert (call.name, call.arguments, call.raw_arguments) == ("read", {}, bad)


@pytest.mark.parametrize("raw", ['["not", "an", "object"]', "42", "null", "{'single': 'quotes'}"])
def test_tool_arguments_that_are_not_a_json_object_stay_raw(raw: str) -> None:
    call = ToolCall("c1", "read", {})
    finish_tool_call(call, raw)
    assert call.arguments == {} and call.raw_arguments == raw
    finish_tool_call(call, ' {"path": "a"} ')
    assert call.arguments == {"path": "a"} and call.raw_arguments is None
