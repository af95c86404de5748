"""A tiny HTTP/1.1 server on its own event loop in a background thread.

Running in a thread makes the fake provider usable from sync tests, async tests (whose loop
stays free) and tests that drive a CLI subprocess alike. Only what clients of LLM APIs need:
Content-Length or chunked request bodies, keep-alive, chunked streaming responses whose
every chunk is flushed on its own, and an abrupt close (``abort``) for cut-stream tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Site Overloaded",
}
_MAX_HEAD = 64 * 1024


class _BadRequest(Exception):
    """The bytes on the socket are not an HTTP/1.1 request we understand."""


@dataclass(slots=True, frozen=True)
class HttpRequest:
    """One parsed request; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ResponseWriter:
    """Writes one response: a whole body, or a chunked stream, or an abrupt close."""

    def __init__(self, writer: asyncio.StreamWriter, keep_alive: bool) -> None:
        self._writer = writer
        self.keep_alive = keep_alive
        self.aborted = False

    def _head(self, status: int, headers: Mapping[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append("connection: keep-alive" if self.keep_alive else "connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, status: int, content_type: str, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        """A complete response with a Content-Length body."""
        all_headers = {"content-type": content_type, "content-length": str(len(data)), **(headers or {})}
        self._writer.write(self._head(status, all_headers) + data)
        await self._writer.drain()

    async def send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        """A complete JSON response."""
        await self.send(status, "application/json", json.dumps(obj, ensure_ascii=False).encode(), headers)

    async def start_stream(self, status: int, headers: Mapping[str, str]) -> None:
        """Send the head of a chunked response."""
        self._writer.write(self._head(status, {**headers, "transfer-encoding": "chunked"}))
        await self._writer.drain()

    async def send_chunk(self, data: bytes) -> None:
        """One chunk, flushed before returning (one SSE event per chunk)."""
        if data:
            self._writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await self._writer.drain()

    async def end_stream(self) -> None:
        """The terminating zero-length chunk."""
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()

    def abort(self) -> None:
        """Drop the connection now, without finishing the response."""
        self.aborted = True
        self._writer.transport.abort()


Handler = Callable[[HttpRequest, ResponseWriter], Awaitable[None]]


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError as exc:
            raise _BadRequest(f"bad chunk size {size_line!r}") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """The next request on the connection, or None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest("connection closed inside a request head") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise _BadRequest("request head too large") from exc
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"bad request line {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return HttpRequest(parts[0].upper(), parts[1], headers, body)


class BackgroundHttpServer:
    """Serves ``handler`` on ``host:port`` (0 = ephemeral) from a daemon thread until :meth:`stop`."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (valid after :meth:`start`)."""
        return self._port

    def start(self) -> int:
        """Start serving; returns the port. Raises OSError if the address cannot be bound."""
        if self._thread is not None:
            return self._port
        self._thread = threading.Thread(target=self._run, name="nexus-fake-provider", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error
        return self._port

    def stop(self) -> None:
        """Close the listener and every open connection, then end the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already gone
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = None
        self._loop = None

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, self._host, self._port, limit=_MAX_HEAD)
            )
            self._port = int(self._server.sockets[0].getsockname()[1])
        except OSError as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._serve_requests(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, _BadRequest):
            pass
        except asyncio.CancelledError:
            # only stop() cancels connection tasks; ending normally keeps asyncio's
            # start_server callback from logging the cancellation as an error
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _serve_requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await read_request(reader)
            if request is None:
                return
            keep_alive = request.headers.get("connection", "").lower() != "close"
            response = ResponseWriter(writer, keep_alive)
            await self._handler(request, response)
            if response.aborted or not response.keep_alive:
                return
