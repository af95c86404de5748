"""A fake LLM provider on 127.0.0.1 that speaks the real OpenAI and Anthropic wire formats.

Point any client (ours, an SDK, a CLI in a subprocess) at :attr:`FakeProviderServer.url`
and script what the "provider" answers — including the failures that are hard to get from
a real one on demand: 401/429/500/529, context overflow, stalled and cut streams, broken
SSE data and HTML error pages. Every request is recorded for assertions.

Run standalone with ``python -m nexus.testing.fake_server [--script steps.json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from nexus.llm import Context
from nexus.testing import _chunks, _wire_anthropic, _wire_openai
from nexus.testing._chunks import DEFAULT_CHUNK_CHARS
from nexus.testing._http_server import BackgroundHttpServer, HttpRequest, ResponseWriter
from nexus.testing._provider_errors import (
    HTML_PAGE,
    Flavor,
    error_body,
    http_error_body,
    http_error_headers,
    overflow_body,
    stream_error_event,
)
from nexus.testing.steps import (
    Cut,
    HtmlError,
    HttpError,
    Malformed,
    Overflow,
    Replay,
    Stall,
    Step,
    StreamError,
    check_step,
    echo,
    resolve,
    steps_from_json,
)


@dataclass(slots=True, frozen=True)
class RecordedRequest:
    """A request the server received: header names lower-cased, ``body`` the parsed JSON (None if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw_body: bytes = field(default=b"", repr=False)


def _route(method: str, path: str) -> Literal["openai", "anthropic", "responses", "models"] | None:
    bare = path.split("?", 1)[0].rstrip("/")
    if method == "POST" and bare in ("/v1/chat/completions", "/chat/completions"):
        return "openai"
    if method == "POST" and bare in ("/v1/responses", "/responses"):
        return "responses"
    if method == "POST" and bare in ("/v1/messages", "/messages"):
        return "anthropic"
    if method == "GET" and bare in ("/v1/models", "/models"):
        return "models"
    return None


class FakeProviderServer:
    """A scripted provider server on an ephemeral loopback port (sync or async context manager).

    Both endpoints share one FIFO ``script``; when it is empty the server answers with
    ``default`` (e.g. ``steps.echo``) or, if that is None, HTTP 500 "no scripted response".
    ``chunk_delay`` (seconds) paces every SSE event for slow-stream tests. ``usage=False``
    makes the OpenAI endpoint report no usage at all, even when the request asks for it
    with ``stream_options.include_usage`` (as llama.cpp's server does); Anthropic's
    always reports it, as the real API does.
    """

    def __init__(
        self,
        *steps: Step,
        default: Step | None = None,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        chunk_delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: str | Path | None = None,
        usage: bool = True,
    ) -> None:
        self.default = default
        self.usage = usage
        self.chunk_chars = chunk_chars
        self.chunk_delay = chunk_delay
        self._log_path = Path(log_path) if log_path is not None else None
        self._lock = threading.Lock()
        self._queue: deque[Step] = deque()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._http = BackgroundHttpServer(self._handle, host, port)
        self._host = host
        self.script(*steps)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeProviderServer:
        """Start serving in a background thread (idempotent); returns self."""
        self._http.start()
        return self

    def stop(self) -> None:
        """Stop serving and close open connections (idempotent)."""
        self._http.stop()

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeProviderServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    # ------------------------------------------------------------------ addresses

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (after start)."""
        if self._http.port == 0:
            raise RuntimeError("FakeProviderServer is not started; use `with FakeProviderServer() as server:`")
        return f"http://{self._host}:{self._http.port}"

    @property
    def openai_base_url(self) -> str:
        """Base URL for OpenAI clients (they post to ``{base}/chat/completions``)."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for Anthropic clients (they post to ``{base}/v1/messages``)."""
        return self.url

    # ------------------------------------------------------------------ script and records

    def script(self, *steps: Step) -> None:
        """Queue steps; each model request (either endpoint) consumes the next one."""
        checked = [check_step(s, f"step {i}") for i, s in enumerate(steps)]
        with self._lock:
            self._queue.extend(checked)

    @property
    def pending(self) -> int:
        """How many scripted steps are still queued."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request; AssertionError if none arrived."""
        with self._lock:
            if not self._requests:
                raise AssertionError("FakeProviderServer received no request")
            return self._requests[-1]

    def assert_complete(self) -> None:
        """Fail the test if scripted steps were never requested."""
        with self._lock:
            left = [type(s).__name__ for s in self._queue]
            served = self._served
        if left:
            raise AssertionError(
                f"{len(left)} scripted step(s) never requested after {served} request(s): {', '.join(left)}"
            )

    def _next_step(self) -> tuple[Step | None, int]:
        with self._lock:
            self._served += 1
            return (self._queue.popleft() if self._queue else self.default), self._served

    def _record(self, request: HttpRequest) -> dict[str, Any] | None:
        try:
            parsed = json.loads(request.body) if request.body else None
        except ValueError:
            parsed = None
        body = parsed if isinstance(parsed, dict) else None
        record = RecordedRequest(request.method, request.path, dict(request.headers), body, request.body)
        with self._lock:
            self._requests.append(record)
        if self._log_path is not None:
            line = {"method": record.method, "path": record.path, "headers": record.headers, "body": body}
            with self._log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(line) + "\n")
        return body

    # ------------------------------------------------------------------ handling

    async def _handle(self, request: HttpRequest, response: ResponseWriter) -> None:
        body = self._record(request)
        route = _route(request.method, request.path)
        if route == "models":
            await response.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            return
        if route is None:
            await response.send_json(
                404, error_body(404, f"no such endpoint: {request.method} {request.path}", "openai")
            )
            return
        flavor: Flavor = "anthropic" if route == "anthropic" else "openai"
        if body is None:
            await response.send_json(400, error_body(400, "request body is not a JSON object", flavor))
            return
        raw_step, number = self._next_step()
        if raw_step is None:
            await response.send_json(500, error_body(500, "no scripted response queued (FakeProviderServer)", flavor))
            return
        try:
            if route == "responses":  # only replayed captures are served here: no context to read
                context = Context()
            else:
                context = (_wire_openai if route == "openai" else _wire_anthropic).context_from_body(body)
            step = resolve(raw_step, context)
        except Exception as exc:  # the test's from_context function failed: make it visible
            await response.send_json(
                500, error_body(500, f"from_context step failed: {type(exc).__name__}: {exc}", flavor)
            )
            return
        if isinstance(step, Replay):
            await _send_replay(step, response, self.chunk_delay)
        elif route == "responses":
            message = f"{type(step).__name__} steps are not served on {request.path}: use replay(capture)"
            await response.send_json(500, error_body(500, message, flavor))
        else:
            await self._answer(step, flavor, body, response, f"fake{number:04d}")

    async def _answer(
        self, step: Step, flavor: Flavor, body: dict[str, Any], response: ResponseWriter, tag: str
    ) -> None:
        if isinstance(step, HttpError):
            await _send_http_error(step, flavor, response)
        elif isinstance(step, Overflow):
            style = flavor if step.style == "auto" else step.style
            await response.send_json(400, overflow_body(style, step.tokens, step.maximum))
        elif isinstance(step, HtmlError):
            await response.send(step.status, "text/html", HTML_PAGE.format(status=step.status).encode())
        elif body.get("stream"):
            await self._stream(step, flavor, body, response, tag)
        else:
            await self._plain(step, flavor, body, response, tag)

    async def _plain(
        self, step: Step, flavor: Flavor, body: dict[str, Any], response: ResponseWriter, tag: str
    ) -> None:
        if isinstance(step, Cut):
            response.abort()
            return
        if isinstance(step, Malformed):
            await response.send(200, "application/json", step.data.encode())
            return
        if isinstance(step, StreamError):  # no stream to break: the error comes as a plain HTTP error
            await _send_http_error(HttpError(step.status, step.message), flavor, response)
            return
        if isinstance(step, Stall):
            await _sit_out(step)
        reply = _chunks.streamed_reply(step)
        if flavor == "openai":
            await response.send_json(200, _wire_openai.completion_json(reply, body, tag, usage=self.usage))
        else:
            await response.send_json(200, _wire_anthropic.message_json(reply, body, tag, usage_reported=self.usage))

    async def _stream(
        self, step: Step, flavor: Flavor, body: dict[str, Any], response: ResponseWriter, tag: str
    ) -> None:
        reply = _chunks.streamed_reply(step)
        if flavor == "openai":
            frames = _wire_openai.stream_frames(reply, body, self.chunk_chars, tag, usage=self.usage)
        else:
            frames = _wire_anthropic.stream_frames(reply, body, self.chunk_chars, tag, usage_reported=self.usage)
        if isinstance(step, Malformed):
            bad = ("data: " if flavor == "openai" else "event: content_block_delta\ndata: ") + step.data + "\n\n"
            frames.insert(step.after_chunks, bad.encode())
        if isinstance(step, Cut):
            frames = frames[: step.after_chunks]
        if isinstance(step, StreamError):
            frames = [*frames[: step.after_chunks], stream_error_event(step.status, step.message, flavor)[0]]
        headers = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
        await response.start_stream(200, headers)
        for index, frame in enumerate(frames):
            if isinstance(step, Stall) and index == step.after_chunks:
                await _sit_out(step)
            await response.send_chunk(frame)
            if self.chunk_delay > 0:
                await asyncio.sleep(self.chunk_delay)
        if isinstance(step, Cut):
            response.abort()
            return
        await response.end_stream()


async def _send_replay(step: Replay, response: ResponseWriter, delay: float) -> None:
    """A capture's response again: status, headers, body (in ``piece_bytes`` pieces), and its cut, if any."""
    record = step.record
    if record.status is None:  # the captured exchange never got a response
        response.abort()
        return
    headers = {k: v for k, v in record.response_headers.items() if k.lower() not in _REPLAY_SKIP}
    kind = next((v for k, v in record.response_headers.items() if k.lower() == "content-type"), "")
    body = record.body
    streamed = step.piece_bytes is not None or record.error is not None or record.content_type == "text/event-stream"
    if not streamed:
        await response.send(record.status, kind or "application/octet-stream", body, headers)
        return
    await response.start_stream(record.status, {"content-type": kind, **headers} if kind else headers)
    size = step.piece_bytes or max(1, len(body))
    for start in range(0, len(body), size):
        await response.send_chunk(body[start : start + size])
        if delay > 0:
            await asyncio.sleep(delay)
    if record.error is not None:
        response.abort()
        return
    await response.end_stream()


_REPLAY_SKIP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "content-type"})


async def _send_http_error(step: HttpError, flavor: Flavor, response: ResponseWriter) -> None:
    content_type = "text/plain; charset=utf-8" if isinstance(step.body, str) else "application/json"
    body = http_error_body(step, flavor).encode()
    await response.send(step.status, content_type, body, http_error_headers(step))


# --------------------------------------------------------------------------- command line


async def _sit_out(step: Stall) -> None:
    """A stall's silence: ``seconds``, or until the test sets its ``release``."""
    if step.release is None:
        await asyncio.sleep(step.seconds)
        return
    deadline = time.monotonic() + step.seconds
    # polled: it is a threading.Event the test sets from its own thread (a thread blocked on it would outlive
    # a stopped server for the whole ``seconds``)
    while not step.release.is_set() and (left := deadline - time.monotonic()) > 0:  # noqa: ASYNC110
        await asyncio.sleep(min(0.02, left))


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted; print the URL first so scripts can read it from stdout."""
    parser = argparse.ArgumentParser(prog="python -m nexus.testing.fake_server", description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, help="JSON file: a list of steps (default: echo every request)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: an ephemeral one)")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between SSE events")
    parser.add_argument("--log", type=Path, help="append every request as a JSON line to this file")
    parser.add_argument("--no-echo", action="store_true", help="answer HTTP 500 once the script is used up")
    parser.add_argument("--no-usage", action="store_true", help="report no token usage (like llama.cpp's server)")
    args = parser.parse_args(argv)
    steps: list[Step] = []
    if args.script is not None:
        try:
            steps = steps_from_json(json.loads(args.script.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"error: cannot load script {args.script}: {exc}", file=sys.stderr)
            return 2
    server = FakeProviderServer(
        *steps,
        default=None if args.no_echo else echo,
        chunk_delay=args.chunk_delay,
        port=args.port,
        log_path=args.log,
        usage=not args.no_usage,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(server.url, flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
