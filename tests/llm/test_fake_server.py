"""Both HTTP providers end to end against nexus.testing's FakeProviderServer (real loopback HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nexus.llm import Context, Model, StreamOptions, ThinkingContent, Tool, UserMessage, complete, stream
from nexus.testing import FakeProviderServer, steps

TOOL = Tool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
CTX = Context(system_prompt="sys", messages=[UserMessage("hello")], tools=[TOOL])


@pytest.fixture
async def server() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer() as srv:
        yield srv


def models(server: FakeProviderServer) -> list[Model]:
    return [
        Model(id="fake-oa", provider="openai", api="openai-completions", base_url=server.openai_base_url),
        Model(id="fake-an", provider="anthropic", api="anthropic-messages", base_url=server.anthropic_base_url),
    ]


OPTS = StreamOptions(api_key="test-key", timeout=5)


async def test_text_thinking_and_tool_calls(server: FakeProviderServer) -> None:
    for model in models(server):
        server.script(
            steps.reply(steps.thinking("plan"), steps.text("Hello there, friend.")),
            steps.tool_call("read", {"path": "a.txt"}, id="call_7"),
        )
        events = [e async for e in stream(model, CTX, OPTS)]
        assert events[0].type == "start" and events[-1].type == "done"
        first = events[-1].message  # type: ignore[union-attr]
        assert first.text == "Hello there, friend.", model.api
        thinking = [b for b in first.content if isinstance(b, ThinkingContent)]
        assert [t.thinking for t in thinking] == ["plan"], model.api
        if model.api == "anthropic-messages":
            assert thinking[0].signature == "sig-scripted"
        assert any(e.type == "text_delta" for e in events)
        second = await complete(model, CTX, OPTS)
        assert second.stop_reason == "tool_use"
        assert [(c.id, c.name, c.arguments) for c in second.tool_calls] == [("call_7", "read", {"path": "a.txt"})]
        assert server.last_request.headers.get("authorization") == "Bearer test-key" or (
            server.last_request.headers.get("x-api-key") == "test-key"
        )
    server.assert_complete()


async def test_http_failures_are_classified(server: FakeProviderServer) -> None:
    for model in models(server):
        server.script(
            steps.http_error(401),
            steps.http_error(429, retry_after=3),
            steps.http_error(500),
            steps.http_error(529),
            steps.overflow(),
            steps.html_error(502),
        )
        got = [await complete(model, CTX, OPTS) for _ in range(6)]
        kinds = [m.error_kind for m in got]
        assert kinds[0] in ("auth", "auth_permanent"), model.api
        assert kinds[1:] == ["rate_limit", "timeout", "overloaded", "context_overflow", "timeout"], model.api
        assert got[1].retry_after == 3.0
        assert all(m.stop_reason == "error" and m.error_message for m in got)
    server.assert_complete()


async def test_broken_streams_keep_partial_content(server: FakeProviderServer) -> None:
    for model in models(server):
        server.script(
            steps.cut(after_chunks=3),
            steps.malformed(after_chunks=2),
            steps.stall(after_chunks=2, seconds=5),
            steps.stream_error(after_chunks=2, status=529),
            steps.stream_error(after_chunks=2, status=429),
        )
        cut = await complete(model, CTX, OPTS)
        assert cut.stop_reason == "error" and cut.error_kind == "network", (model.api, cut.error_message)
        bad = await complete(model, CTX, OPTS)
        assert bad.stop_reason == "error" and "malformed" in (bad.error_message or ""), model.api
        stalled = await complete(model, CTX, StreamOptions(api_key="k", timeout=0.3))
        assert stalled.stop_reason == "error" and stalled.error_kind == "timeout", model.api
        overloaded = await complete(model, CTX, OPTS)
        assert overloaded.error_kind == "overloaded", (model.api, overloaded.error_message)
        limited = await complete(model, CTX, OPTS)
        assert limited.error_kind == "rate_limit", (model.api, limited.error_message)
    server.assert_complete()


async def test_requests_carry_the_wire_format(server: FakeProviderServer) -> None:
    oa, an = models(server)
    server.script(steps.text("a"), steps.text("b"))
    await complete(oa, CTX, OPTS)
    body = server.last_request.body or {}
    assert body["stream"] is True and body["messages"][0] == {"role": "system", "content": "sys"}
    await complete(an, CTX, OPTS)
    body = server.last_request.body or {}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert server.last_request.path.endswith("/v1/messages")
