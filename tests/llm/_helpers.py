"""Wire-format builders and a mock transport for the provider tests (real captured shapes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx

from nexus.llm import _http


def openai_sse(chunks: Iterable[dict[str, Any]], done: bool = True) -> bytes:
    """OpenAI chat-completions SSE: ``data: {...}\\n\\n`` per chunk, then ``data: [DONE]``."""
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


def oa_chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One chat.completion.chunk with a single choice."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }


def oa_usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    """The final usage chunk sent with ``stream_options.include_usage``."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }


def named_sse(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    """Anthropic / Responses style SSE: ``event: name`` + ``data: {...}``."""
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def anthropic_text_events(text_parts: list[str], stop: str = "end_turn") -> list[tuple[str, dict[str, Any]]]:
    """A whole Anthropic text response split into ``text_parts`` deltas."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude",
                    "stop_reason": None,
                    "usage": {
                        "input_tokens": 12,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 100,
                        "cache_read_input_tokens": 1000,
                    },
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
    ]
    for part in text_parts:
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}},
            )
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


Handler = Callable[[httpx.Request], httpx.Response]


class MockHTTP:
    """Installs an ``httpx.MockTransport`` for every provider call and records the requests."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self._responses: list[httpx.Response | Handler] = []

    def add(self, response: httpx.Response | Handler) -> None:
        self._responses.append(response)

    def sse(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.add(httpx.Response(status, content=body, headers={"content-type": "text/event-stream", **(headers or {})}))

    def error(self, status: int, body: str | bytes, headers: dict[str, str] | None = None) -> None:
        content = body.encode() if isinstance(body, str) else body
        self.add(httpx.Response(status, content=content, headers=headers or {}))

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self._responses:
            return httpx.Response(500, content=b'{"error": {"message": "no scripted response"}}')
        item = self._responses.pop(0)
        return item(request) if callable(item) else item

    @property
    def last_json(self) -> Any:
        return json.loads(self.requests[-1].content)

    def install(self) -> None:
        _http.use_transport(httpx.MockTransport(self._handle))


async def slow_body(parts: list[bytes], stall_after: int, stall_seconds: float = 30.0) -> AsyncIterator[bytes]:
    """A response body that sends ``stall_after`` parts, then hangs (for abort / cancel tests)."""
    for i, part in enumerate(parts):
        if i == stall_after:
            await asyncio.sleep(stall_seconds)
        yield part
