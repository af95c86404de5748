"""FakeProviderServer failure injection: HTTP errors, overflow, stalls, cuts, malformed data, HTML pages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import (
    cut,
    from_context,
    html_error,
    http_error,
    malformed,
    overflow,
    stall,
    stream_error,
    text,
)

SSE = Callable[[bytes], list[tuple[str | None, str]]]
OPENAI = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC = {"model": "m", "stream": True, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


async def post(server: FakeProviderServer, flavor: str, body: dict[str, Any] | None = None) -> httpx.Response:
    url = (
        server.openai_base_url + "/chat/completions"
        if flavor == "openai"
        else server.anthropic_base_url + "/v1/messages"
    )
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=body or (OPENAI if flavor == "openai" else ANTHROPIC))


@pytest.mark.parametrize(
    ("status", "flavor", "error_type"),
    [
        (401, "anthropic", "authentication_error"),
        (403, "anthropic", "permission_error"),
        (429, "anthropic", "rate_limit_error"),
        (500, "anthropic", "api_error"),
        (529, "anthropic", "overloaded_error"),
        (401, "openai", "invalid_request_error"),
        (429, "openai", "requests"),
        (500, "openai", "server_error"),
    ],
)
async def test_http_errors_have_the_provider_body_shape(
    fake_provider: FakeProviderServer, status: int, flavor: str, error_type: str
) -> None:
    fake_provider.script(http_error(status))
    response = await post(fake_provider, flavor)
    assert response.status_code == status and response.headers["content-type"] == "application/json"
    data = response.json()
    assert data["error"]["type"] == error_type and data["error"]["message"]
    if flavor == "anthropic":
        assert data["type"] == "error"
    else:
        assert set(data["error"]) == {"message", "type", "param", "code"}


async def test_retry_after_header_and_custom_message(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(http_error(429, "slow down", retry_after=3), http_error(429, retry_after=0.5))
    first = await post(fake_provider, "anthropic")
    assert first.headers["retry-after"] == "3" and first.json()["error"]["message"] == "slow down"
    second = await post(fake_provider, "openai")
    assert second.headers["retry-after"] == "0.5"


async def test_custom_error_body_and_headers(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(
        http_error(400, body={"detail": "custom"}, headers={"x-custom": "1"}), http_error(503, body="upstream down")
    )
    first = await post(fake_provider, "openai")
    assert first.json() == {"detail": "custom"} and first.headers["x-custom"] == "1"
    second = await post(fake_provider, "openai")
    assert second.status_code == 503 and second.text == "upstream down"
    assert second.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    ("flavor", "style", "needle", "code"),
    [
        ("anthropic", "auto", "prompt is too long: 250000 tokens > 200000 maximum", None),
        ("openai", "auto", "This model's maximum context length is 200000 tokens", "context_length_exceeded"),
        ("openai", "anthropic", "prompt is too long", None),
        ("openai", "llama.cpp", "exceeds the available context size", 400),
    ],
)
async def test_overflow_wording(
    fake_provider: FakeProviderServer, flavor: str, style: Any, needle: str, code: object
) -> None:
    fake_provider.script(overflow(style))
    response = await post(fake_provider, flavor)
    assert response.status_code == 400
    error = response.json()["error"]
    assert needle in error["message"]
    if code is not None:
        assert error["code"] == code


async def test_html_error_page(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(html_error(502))
    response = await post(fake_provider, "anthropic")
    assert response.status_code == 502 and response.headers["content-type"] == "text/html"
    assert "<h1>502 Bad Gateway</h1>" in response.text


@pytest.mark.parametrize("flavor", ["openai", "anthropic"])
async def test_cut_sends_n_events_then_drops_the_connection(
    fake_provider: FakeProviderServer, sse: SSE, flavor: str
) -> None:
    fake_provider.script(cut(after_chunks=3, of=text("a long answer that will be cut short")), text("after"))
    received = b""
    url = (
        fake_provider.openai_base_url + "/chat/completions"
        if flavor == "openai"
        else fake_provider.url + "/v1/messages"
    )
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
            async with client.stream("POST", url, json=OPENAI if flavor == "openai" else ANTHROPIC) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_bytes():
                    received += chunk
        assert len(sse(received)) == 3
        assert b"[DONE]" not in received and b"message_stop" not in received
        # the server keeps serving after a cut
        follow = await client.post(url, json={**(OPENAI if flavor == "openai" else ANTHROPIC), "stream": False})
    assert follow.status_code == 200 and fake_provider.pending == 0


async def test_cut_without_stream_drops_before_any_response(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(cut())
    with pytest.raises(httpx.RemoteProtocolError):
        await post(fake_provider, "openai", {**OPENAI, "stream": False})


async def test_stall_trips_a_client_read_timeout_after_some_events(fake_provider: FakeProviderServer, sse: SSE) -> None:
    fake_provider.script(stall(after_chunks=2, seconds=30))
    received = b""
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            async with client.stream("POST", fake_provider.openai_base_url + "/chat/completions", json=OPENAI) as resp:
                async for chunk in resp.aiter_bytes():
                    received += chunk
    assert len(sse(received)) == 2


async def test_short_stall_completes(fake_provider: FakeProviderServer, sse: SSE) -> None:
    fake_provider.script(stall(after_chunks=1, seconds=0.05, then=text("eventually")))
    response = await post(fake_provider, "anthropic")
    assert "eventually" in "".join(json.loads(d).get("delta", {}).get("text", "") for _, d in sse(response.content))


async def test_stop_does_not_wait_for_a_stalled_stream() -> None:
    server = FakeProviderServer(stall(after_chunks=1, seconds=3600)).start()
    try:
        url = server.openai_base_url + "/chat/completions"
        async with httpx.AsyncClient() as client, client.stream("POST", url, json=OPENAI) as response:
            chunks = response.aiter_bytes()
            first = await chunks.__anext__()
            assert first.startswith(b"data: ")
            await asyncio.to_thread(server.stop)  # returns although the handler is mid-sleep
            with pytest.raises(httpx.RemoteProtocolError):
                async for _ in chunks:
                    pass
    finally:
        server.stop()


@pytest.mark.parametrize("flavor", ["openai", "anthropic"])
async def test_malformed_data_line_among_valid_events(fake_provider: FakeProviderServer, sse: SSE, flavor: str) -> None:
    fake_provider.script(malformed(after_chunks=1, data="{not json", of=text("ok")))
    events = sse((await post(fake_provider, flavor)).content)
    assert events[1][1] == "{not json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[1][1])
    json.loads(events[0][1])
    assert events[-1][1] in ("[DONE]", '{"type": "message_stop"}')


async def test_malformed_non_stream_body(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(malformed(data="{broken"))
    response = await post(fake_provider, "anthropic", {**ANTHROPIC, "stream": False})
    assert response.status_code == 200 and response.text == "{broken"


async def test_empty_script_is_500_and_bad_json_is_400(fake_provider: FakeProviderServer) -> None:
    empty = await post(fake_provider, "anthropic")
    assert empty.status_code == 500 and "no scripted response" in empty.json()["error"]["message"]
    async with httpx.AsyncClient() as client:
        bad = await client.post(fake_provider.openai_base_url + "/chat/completions", content=b"{nope")
    assert bad.status_code == 400 and "not a JSON object" in bad.json()["error"]["message"]
    assert fake_provider.requests[-1].body is None and fake_provider.requests[-1].raw_body == b"{nope"


async def test_failing_from_context_is_a_visible_500(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(from_context(lambda c: 1 / 0))  # type: ignore[arg-type,return-value]
    response = await post(fake_provider, "openai")
    assert response.status_code == 500 and "ZeroDivisionError" in response.json()["error"]["message"]


async def test_assert_complete_names_leftovers(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(text("used"), http_error(429), overflow())
    await post(fake_provider, "openai")
    with pytest.raises(
        AssertionError, match="2 scripted step\\(s\\) never requested after 1 request\\(s\\): HttpError, Overflow"
    ):
        fake_provider.assert_complete()


async def test_stream_error_event_in_each_dialect(fake_provider: FakeProviderServer, sse: SSE) -> None:
    fake_provider.script(stream_error(after_chunks=2), stream_error(after_chunks=1, status=500, message="boom"))
    anthropic = sse((await post(fake_provider, "anthropic")).content)
    assert [name for name, _ in anthropic] == ["message_start", "ping", "error"]
    assert json.loads(anthropic[-1][1]) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    openai = sse((await post(fake_provider, "openai")).content)
    assert len(openai) == 2 and json.loads(openai[-1][1])["error"]["message"] == "boom"


async def test_stream_error_without_stream_is_an_http_error(fake_provider: FakeProviderServer) -> None:
    fake_provider.script(stream_error(status=529))
    response = await post(fake_provider, "anthropic", {**ANTHROPIC, "stream": False})
    assert response.status_code == 529 and response.json()["error"]["type"] == "overloaded_error"
