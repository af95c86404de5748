"""FakeProviderServer success paths, checked byte by byte with plain httpx and a hand-written SSE reader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from nexus.llm.types import Usage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, from_context, reply, text, thinking, tool_call

SSE = Callable[[bytes], list[tuple[str | None, str]]]
SSEJson = Callable[[bytes], list[dict[str, Any]]]

OPENAI_BODY = {"model": "gpt-fake", "stream": True, "messages": [{"role": "user", "content": "hi there"}]}
ANTHROPIC_BODY = {
    "model": "claude-fake",
    "stream": True,
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}


async def post_raw(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        response = await client.post(url, json=body, headers=headers)
        await response.aread()
        return response


async def test_openai_stream_text_and_usage(fake_provider: FakeProviderServer, sse: SSE, sse_json: SSEJson) -> None:
    fake_provider.chunk_chars = 5
    fake_provider.script(text("Hello, wonderful world"))
    body = {**OPENAI_BODY, "stream_options": {"include_usage": True}}
    response = await post_raw(fake_provider.openai_base_url + "/chat/completions", body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response.content)
    assert all(name is None for name, _ in events) and events[-1] == (None, "[DONE]")
    chunks = sse_json(response.content)
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "gpt-fake" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks[1:] if c["choices"] and c["choices"][0]["delta"]]
    assert "".join(pieces) == "Hello, wonderful world" and max(len(p) for p in pieces) == 5
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finish) == 1 and finish[0]["choices"][0]["finish_reason"] == "stop"
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 6
    assert usage_chunk["usage"]["total_tokens"] == usage_chunk["usage"]["prompt_tokens"] + 6


async def test_openai_usage_chunk_only_when_asked(fake_provider: FakeProviderServer, sse_json: SSEJson) -> None:
    fake_provider.script(text("no usage please"))
    response = await post_raw(fake_provider.openai_base_url + "/chat/completions", OPENAI_BODY)
    assert all("usage" not in c for c in sse_json(response.content))


async def test_openai_stream_tool_call_argument_deltas(fake_provider: FakeProviderServer, sse_json: SSEJson) -> None:
    fake_provider.script(reply(text("let me look"), tool_call("read", {"path": "src/a.py", "limit": 20}, id="call_1")))
    response = await post_raw(fake_provider.openai_base_url + "/chat/completions", OPENAI_BODY)
    deltas = [c["choices"][0]["delta"] for c in sse_json(response.content) if c["choices"]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0] == {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": ""}}
    assert len(calls) > 2 and all(set(c) == {"index", "function"} for c in calls[1:])
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"path": "src/a.py", "limit": 20}
    finish = [c["choices"][0]["finish_reason"] for c in sse_json(response.content) if c["choices"]]
    assert finish[-1] == "tool_calls"


async def test_openai_reasoning_content_and_scripted_cache_usage(
    fake_provider: FakeProviderServer, sse_json: SSEJson
) -> None:
    fake_provider.script(reply(thinking("deep thought"), text("42"), usage=Usage(input=100, output=7, cache_read=30)))
    body = {**OPENAI_BODY, "stream_options": {"include_usage": True}}
    chunks = sse_json((await post_raw(fake_provider.openai_base_url + "/chat/completions", body)).content)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"])
    assert reasoning == "deep thought"
    usage = chunks[-1]["usage"]
    assert usage["prompt_tokens"] == 130 and usage["prompt_tokens_details"]["cached_tokens"] == 30
    assert usage["completion_tokens"] == 7


async def test_openai_non_stream_json(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(reply(text("plain"), tool_call("ls", {"dir": "."}, id="c9")))
    response = await post_raw(fake_provider.openai_base_url + "/chat/completions", {**OPENAI_BODY, "stream": False})
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    assert data["object"] == "chat.completion"
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "plain"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "ls", "arguments": '{"dir":"."}'}
    assert data["usage"]["completion_tokens"] > 0


async def test_anthropic_stream_event_sequence(fake_provider: FakeProviderServer, sse: SSE) -> None:
    fake_provider.chunk_chars = 4
    fake_provider.script(reply(thinking("hmm, ok", signature="sig-abc"), text("Hi you"), tool_call("read", {"p": "x"})))
    response = await post_raw(fake_provider.anthropic_base_url + "/v1/messages", ANTHROPIC_BODY)
    events = sse(response.content)
    names = [name for name, _ in events]
    payloads = [json.loads(data) for _, data in events]
    assert all(p["type"] == n for n, p in zip(names, payloads, strict=True))  # event name matches data type
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    start = payloads[0]["message"]
    assert start["model"] == "claude-fake" and start["usage"]["input_tokens"] > 0 and start["content"] == []
    blocks = [p for p in payloads if p["type"] == "content_block_start"]
    assert [b["content_block"]["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    assert [b["index"] for b in blocks] == [0, 1, 2]
    deltas = [p["delta"] for p in payloads if p["type"] == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "hmm, ok"
    signatures = [d for d in deltas if d["type"] == "signature_delta"]
    assert signatures == [{"type": "signature_delta", "signature": "sig-abc"}]
    assert "".join(d.get("text", "") for d in deltas) == "Hi you"
    assert json.loads("".join(d.get("partial_json", "") for d in deltas)) == {"p": "x"}
    tool_start = blocks[2]["content_block"]
    assert tool_start["name"] == "read" and tool_start["id"].startswith("toolu_") and tool_start["input"] == {}
    stops = [p["index"] for p in payloads if p["type"] == "content_block_stop"]
    assert stops == [0, 1, 2]
    message_delta = payloads[-2]
    assert message_delta["delta"]["stop_reason"] == "tool_use" and message_delta["usage"]["output_tokens"] > 0


async def test_anthropic_non_stream_json(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(reply(text("done"), stop_reason="length"))
    response = await post_raw(fake_provider.anthropic_base_url + "/v1/messages", {**ANTHROPIC_BODY, "stream": False})
    data = response.json()
    assert data["type"] == "message" and data["content"] == [{"type": "text", "text": "done"}]
    assert data["stop_reason"] == "max_tokens" and data["usage"]["output_tokens"] == 1


async def test_requests_are_recorded_with_headers_and_body(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(text("a"), text("b"))
    await post_raw(
        fake_provider.openai_base_url + "/chat/completions", OPENAI_BODY, {"Authorization": "Bearer sk-test"}
    )
    await post_raw(fake_provider.anthropic_base_url + "/v1/messages", ANTHROPIC_BODY, {"x-api-key": "sk-ant-test"})
    first, second = fake_provider.requests
    assert (first.method, first.path, first.headers["authorization"]) == (
        "POST",
        "/v1/chat/completions",
        "Bearer sk-test",
    )
    assert first.body == OPENAI_BODY and second.body == ANTHROPIC_BODY
    assert second.headers["x-api-key"] == "sk-ant-test" and fake_provider.last_request is second
    fake_provider.assert_complete()


async def test_one_keep_alive_connection_serves_several_requests(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(text("one"), text("two"), text("three"))
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(limits=limits) as client:
        url = fake_provider.openai_base_url + "/chat/completions"
        bodies = []
        for _ in range(3):
            response = await client.post(url, json={**OPENAI_BODY, "stream": False})
            bodies.append(response.json()["choices"][0]["message"]["content"])
    assert bodies == ["one", "two", "three"]
    assert fake_provider.pending == 0


async def test_from_context_and_echo_see_the_request(fake_provider: FakeProviderServer, sse_json: SSEJson) -> None:
    fake_provider.script(from_context(lambda c: text(f"{c.system_prompt}|{len(c.tools)}|{c.messages[-1].content}")))
    body = {
        "model": "m",
        "system": [{"type": "text", "text": "sys"}],
        "tools": [{"name": "read", "description": "d", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "question"}],
    }
    data = (await post_raw(fake_provider.anthropic_base_url + "/v1/messages", body)).json()
    assert data["content"][0]["text"] == "sys|1|question"
    fake_provider.default = echo
    echo_body: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "echo me"}]}],
    }
    chunks = sse_json((await post_raw(fake_provider.openai_base_url + "/chat/completions", echo_body)).content)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "echo me"


async def test_models_listing_and_unknown_paths(fake_provider: FakeProviderServer) -> None:
    async with httpx.AsyncClient() as client:
        listing = await client.get(fake_provider.openai_base_url + "/models")
        missing = await client.post(fake_provider.url + "/v2/nothing", json={})
    assert listing.json()["data"][0]["id"] == "fake-model"
    assert missing.status_code == 404 and "no such endpoint" in missing.json()["error"]["message"]
    assert [r.path for r in fake_provider.requests] == ["/v1/models", "/v2/nothing"]


def test_sync_context_manager_and_url_before_start() -> None:
    server = FakeProviderServer(text("sync"))
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url
    with server:
        response = httpx.post(server.openai_base_url + "/chat/completions", json={**OPENAI_BODY, "stream": False})
        assert response.json()["choices"][0]["message"]["content"] == "sync"
        assert server.url.startswith("http://127.0.0.1:") and server.anthropic_base_url == server.url
    with pytest.raises(httpx.ConnectError):
        httpx.post(server.openai_base_url + "/chat/completions", json=OPENAI_BODY)


async def test_async_context_manager() -> None:
    async with FakeProviderServer(text("async")) as server:
        response = await post_raw(server.openai_base_url + "/chat/completions", {**OPENAI_BODY, "stream": False})
        assert response.json()["choices"][0]["message"]["content"] == "async"
    server.assert_complete()


async def test_large_and_chunked_request_bodies(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(text("big"), text("chunked"))
    big = {**OPENAI_BODY, "stream": False, "messages": [{"role": "user", "content": "x" * 1_000_000}]}
    payload = json.dumps({**OPENAI_BODY, "stream": False}).encode()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), 7):
            yield payload[start : start + 7]

    async with httpx.AsyncClient() as client:
        first = await client.post(fake_provider.openai_base_url + "/chat/completions", json=big)
        second = await client.post(fake_provider.openai_base_url + "/chat/completions", content=pieces())
    assert first.json()["choices"][0]["message"]["content"] == "big"
    assert second.json()["choices"][0]["message"]["content"] == "chunked"
    assert fake_provider.requests[0].body == big
    assert fake_provider.requests[1].headers["transfer-encoding"] == "chunked"
    assert fake_provider.requests[1].body == {**OPENAI_BODY, "stream": False}


async def test_malformed_http_is_dropped_and_server_keeps_serving(fake_provider: FakeProviderServer) -> None:
    host, port = fake_provider.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"NONSENSE\r\n\r\n")
    await writer.drain()
    assert await reader.read() == b""  # closed without a response
    writer.close()
    await writer.wait_closed()
    fake_provider.script(text("still here"))
    response = await post_raw(fake_provider.openai_base_url + "/chat/completions", {**OPENAI_BODY, "stream": False})
    assert response.json()["choices"][0]["message"]["content"] == "still here"
