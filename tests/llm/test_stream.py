"""The stream contract: bad input raises, everything else ends in exactly one done/error event."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from nexus.errors import UnknownProviderError
from nexus.llm import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    Model,
    StartEvent,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    UserMessage,
    complete,
    known_apis,
    register_api,
    stream,
    unregister_api,
)

from ._helpers import MockHTTP, oa_chunk, openai_sse, slow_body

MODEL = Model(id="m", provider="openai", api="openai-completions", base_url="https://api.example.test/v1")
CTX = Context(messages=[UserMessage("hi")])


def test_unknown_api_raises_listing_known_ones() -> None:
    with pytest.raises(UnknownProviderError, match="openai-completions"):
        stream(Model(id="m", provider="openai", api="carrier-pigeon"), CTX)
    assert {"anthropic-messages", "openai-completions", "openai-responses"} <= set(known_apis())


def test_unknown_provider_without_base_url_raises_naming_the_variable() -> None:
    with pytest.raises(UnknownProviderError, match="MYCORP_BASE_URL") as raised:
        stream(Model(id="m", provider="mycorp", api="openai-completions"), CTX)
    listed = str(raised.value).rsplit(":", 1)[1]
    assert {"anthropic", "openai", "groq", "openrouter", "ollama"} <= {p.strip() for p in listed.split(",")}


def _stalling_response(parts: int) -> httpx.Response:
    chunks = [b"data: " + json.dumps(oa_chunk({"content": f"t{i} "})).encode() + b"\n\n" for i in range(parts)]
    chunks.append(openai_sse([oa_chunk({}, "stop")]))
    return httpx.Response(200, content=slow_body(chunks, stall_after=2), headers={"content-type": "text/event-stream"})


async def test_abort_signal_while_waiting_for_data(mock_http: MockHTTP) -> None:
    mock_http.add(_stalling_response(5))
    signal = AbortSignal()
    seen: list[AssistantMessageEvent] = []

    async def consume() -> None:
        async for event in stream(MODEL, CTX, StreamOptions(api_key="k", signal=signal)):
            seen.append(event)
            if event.type == "text_delta" and event.delta == "t1 ":
                asyncio.get_running_loop().call_later(0.05, signal.abort, "user pressed stop")

    await asyncio.wait_for(consume(), timeout=10)
    assert seen[-1].type == "error"
    final = seen[-1].error  # type: ignore[union-attr]
    assert final.stop_reason == "aborted" and final.error_message == "user pressed stop"
    assert final.text == "t0 t1 "
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_abort_between_events_stops_at_once(mock_http: MockHTTP) -> None:
    mock_http.sse(openai_sse([oa_chunk({"content": f"{i} "}) for i in range(10)] + [oa_chunk({}, "stop")]))
    signal = AbortSignal()
    types: list[str] = []
    async for event in stream(MODEL, CTX, StreamOptions(api_key="k", signal=signal)):
        types.append(event.type)
        if event.type == "text_delta":
            signal.abort()
    assert types == ["start", "text_start", "text_delta", "error"]


async def test_already_aborted_signal_makes_no_request(mock_http: MockHTTP) -> None:
    signal = AbortSignal()
    signal.abort("too late")
    msg = await complete(MODEL, CTX, StreamOptions(api_key="k", signal=signal))
    assert msg.stop_reason == "aborted" and mock_http.requests == []


async def test_task_cancel_gives_aborted_message(mock_http: MockHTTP) -> None:
    mock_http.add(_stalling_response(5))
    seen: list[AssistantMessageEvent] = []
    started = asyncio.Event()

    async def consume() -> None:
        async for event in stream(MODEL, CTX, StreamOptions(api_key="k")):
            seen.append(event)
            if event.type == "text_delta" and event.delta == "t1 ":
                started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.sleep(0.05)
    task.cancel()
    await task  # the stream absorbs the cancellation and ends with its aborted event
    assert seen[-1].type == "error" and seen[-1].reason == "aborted"  # type: ignore[union-attr]
    assert seen[-1].error.text == "t0 t1 "  # type: ignore[union-attr]


async def _serve_then_stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    first = b"data: " + json.dumps(oa_chunk({"content": "slow"})).encode() + b"\n\n"
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    writer.write(f"{len(first):x}\r\n".encode() + first + b"\r\n")
    await writer.drain()
    await asyncio.sleep(30)


async def test_timeout_without_progress_over_real_socket() -> None:
    server = await asyncio.start_server(_serve_then_stall, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        model = Model(id="m", provider="local", api="openai-completions", base_url=f"http://127.0.0.1:{port}/v1")
        msg = await complete(model, CTX, StreamOptions(timeout=0.3))
        assert msg.stop_reason == "error" and msg.error_kind == "timeout"
        assert msg.text == "slow"
    finally:
        server.close()


async def test_connection_refused_is_an_error_message() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    model = Model(id="m", provider="local", api="openai-completions", base_url=f"http://127.0.0.1:{port}/v1")
    msg = await complete(model, CTX, StreamOptions(timeout=5))
    # a refused connection is a network failure, not a slow server (issue 8, item 14)
    assert msg.stop_reason == "error" and msg.error_kind == "network"
    text = msg.error_message or ""
    assert text.startswith(f"cannot connect to http://127.0.0.1:{port}/v1/chat/completions: ")
    assert "refused" in text.lower() and text.endswith("; is the server running?")


async def test_registered_stream_fn_is_held_to_the_contract() -> None:
    async def raising(
        model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(partial)
        yield TextDeltaEvent(0, "x", partial)
        raise RuntimeError("boom")

    async def endless(
        model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield DoneEvent("stop", message)
        yield DoneEvent("stop", message)  # a second terminal event must never reach the consumer

    register_api("test-raising", raising)
    register_api("test-endless", endless)
    try:
        events = [e async for e in stream(Model(id="m", provider="p", api="test-raising"), CTX)]
        assert [e.type for e in events] == ["start", "text_delta", "error"]
        assert events[-1].error.error_message == "RuntimeError: boom"  # type: ignore[union-attr]
        events = [e async for e in stream(Model(id="m", provider="p", api="test-endless"), CTX)]
        assert [e.type for e in events] == ["done"]
    finally:
        unregister_api("test-raising")
        unregister_api("test-endless")


def test_import_is_light() -> None:
    # urllib.parse (and the ipaddress it imports) only when a secret is spelled as a URL would write it
    heavy = "('httpx', 'httpcore', 'nexus.llm.providers.openai_completions', 'urllib.parse', 'ipaddress')"
    code = f"import sys, nexus.llm; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


async def test_connection_is_reused_between_calls() -> None:
    body = openai_sse([oa_chunk({"content": "hi"}), oa_chunk({}, "stop")])
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                writer.write(b"%x\r\n" % len(body) + body + b"\r\n")
                await writer.drain()
                writer.write(b"0\r\n\r\n")  # the end of the body comes after the [DONE] event
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        model = Model(id="m", provider="local", api="openai-completions", base_url=f"http://127.0.0.1:{port}/v1")
        for _ in range(3):
            assert (await complete(model, CTX)).text == "hi"
        assert connections == 1
    finally:
        server.close()


async def test_cancelling_a_registered_stream_fn_gives_an_aborted_message() -> None:
    started = asyncio.Event()

    async def slow(
        model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        partial = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        yield StartEvent(partial)
        partial.content.append(TextContent("half"))
        yield TextDeltaEvent(0, "half", partial)
        await asyncio.sleep(30)  # a user function that ignores cancellation concerns
        yield DoneEvent("stop", partial)

    seen: list[AssistantMessageEvent] = []

    async def consume() -> None:
        async for event in stream(Model(id="m", provider="p", api="test-slow"), CTX):
            seen.append(event)
            if event.type == "text_delta":
                started.set()

    register_api("test-slow", slow)
    try:
        task = asyncio.create_task(consume())
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        await asyncio.wait_for(task, 10)  # absorbed: the consumer got its terminal event instead
    finally:
        unregister_api("test-slow")
    assert [e.type for e in seen] == ["start", "text_delta", "error"]
    final = seen[-1].error  # type: ignore[union-attr]
    assert seen[-1].reason == "aborted" and final.stop_reason == "aborted"  # type: ignore[union-attr]
    assert final.error_message == "cancelled" and final.text == "half"


async def test_abort_reaches_a_stream_driven_from_a_new_task_per_event(mock_http: MockHTTP) -> None:
    # asyncio.wait_for(it.__anext__(), t) runs every step in its own task; the abort must cancel
    # the task waiting on the network now, not the one that started the stream (it would wait out the stall)
    mock_http.add(_stalling_response(5))
    signal = AbortSignal()
    events = stream(MODEL, CTX, StreamOptions(api_key="k", signal=signal))
    seen: list[AssistantMessageEvent] = []

    async def drive() -> None:
        while True:
            try:
                event = await asyncio.wait_for(events.__anext__(), 60)
            except StopAsyncIteration:
                return
            seen.append(event)
            if event.type == "text_delta" and event.delta == "t1 ":
                asyncio.get_running_loop().call_later(0.05, signal.abort, "stop now")

    await asyncio.wait_for(drive(), timeout=10)  # the body stalls for 30 s after two parts
    assert seen[-1].type == "error" and seen[-1].reason == "aborted"  # type: ignore[union-attr]
    assert seen[-1].error.error_message == "stop now" and seen[-1].error.text == "t0 t1 "  # type: ignore[union-attr]
