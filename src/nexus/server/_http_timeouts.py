"""uvicorn's HTTP protocol with deadlines on reading a request: half-sent requests do not hold a connection.

uvicorn closes an idle keep-alive connection, but a connection that sends half a request head,
or a head and then part of its body, is kept forever: a few thousand such sockets ("slow-loris")
hold the server's connections and memory. Here each request must send its whole head within
``header_timeout`` seconds of the connection opening (or of the request's first byte, on a
kept-alive connection), and its whole body within ``body_timeout`` seconds of the head. Past that
the server answers 408 (unless a response is already being written) and closes the connection.

While the server itself has stopped reading (the app has not yet taken the body it was sent, or
a pipelined request waits its turn) the body deadline is moved on: only the client's slowness
counts. A response, however long (an SSE stream), is not limited.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nexus.server._errors import error_json

_STAGE_MESSAGES = {
    "head": "the request head did not arrive within {seconds:g} s (header_timeout_seconds)",
    "body": "the request body did not arrive within {seconds:g} s (body_timeout_seconds)",
}


def _timeout_response(message: str) -> bytes:
    body = error_json("timeout", message)
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class TimedHttpProtocol(HttpToolsProtocol):
    """httptools' protocol plus a read deadline per request (see the module's docstring)."""

    header_timeout: ClassVar[float] = 10.0
    body_timeout: ClassVar[float] = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    @classmethod
    def with_timeouts(cls, header_timeout: float, body_timeout: float) -> type[TimedHttpProtocol]:
        """A subclass with these deadlines (uvicorn builds its protocols from a class)."""
        attributes = {"header_timeout": header_timeout, "body_timeout": body_timeout}
        return type(cls.__name__, (cls,), attributes)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm("head")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # a kept-alive connection's next request (the first one's clock runs)
            self._arm("head")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm("body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def _arm(self, stage: str) -> None:
        self._disarm()
        seconds = self.header_timeout if stage == "head" else self.body_timeout
        self._deadline = self.loop.call_later(seconds, self._expired, stage)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, stage: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if stage == "body" and self.flow.read_paused:  # we are not reading: the client is not to blame
            self._arm("body")
            return
        cycle: Any = self.cycle  # the request being read, or (mid-head) the previous one
        idle = cycle is None or cycle.response_complete
        if idle or (stage == "body" and not cycle.response_started):  # never into the middle of a response
            seconds = self.header_timeout if stage == "head" else self.body_timeout
            self.transport.write(_timeout_response(_STAGE_MESSAGES[stage].format(seconds=seconds)))
        self.transport.close()
