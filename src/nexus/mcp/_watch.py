"""What a connection needs to know about its server besides the protocol: when it went away, what
it wrote that was not MCP, and its last words on stderr.

:class:`WatchedRead` wraps the transport's read stream (the SDK's ``ReadStream`` protocol): the
SDK reads every message through it, so the end of the stream (the program exited, the HTTP
stream dropped) and each line that is not JSON-RPC are seen the moment they happen, without a
task of our own. :class:`StderrTail` keeps the last lines a started program wrote to stderr, to
quote (redacted) when it fails.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

log = logging.getLogger("nexus.mcp")

_TAIL_LINES = 8
_TAIL_LINE_CHARS = 300
_QUOTED_LINES = 3


class WatchedRead:
    """A transport read stream that reports its end (``on_end``) and non-MCP items (``on_garbage``)."""

    __slots__ = ("_ended", "_inner", "_on_end", "_on_garbage")

    def __init__(self, inner: Any, on_end: Callable[[], None], on_garbage: Callable[[Exception], None]) -> None:
        self._inner = inner
        self._on_end = on_end
        self._on_garbage = on_garbage
        self._ended = False

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, where the transport keeps one (the SDK looks for it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        import anyio

        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._end()
            raise
        if isinstance(item, Exception):
            self._on_garbage(item)
        return item

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_end()

    def __aiter__(self) -> WatchedRead:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> WatchedRead:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class StderrTail:
    """The last lines a server wrote to stderr (each line also logged at debug level)."""

    __slots__ = ("_lines", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._lines: deque[str] = deque(maxlen=_TAIL_LINES)

    def __call__(self, line: bytes) -> None:
        from nexus.llm import redact

        text = redact(line.decode("utf-8", "replace"))  # whole: a cut through a credential leaves a part unseen
        log.debug("mcp server %s: %s", self._name, text)
        if text.strip():
            self._lines.append(text[:_TAIL_LINE_CHARS])

    def clear(self) -> None:
        """Forget what an earlier process wrote (a new one starts)."""
        self._lines.clear()

    def quote(self) -> str:
        """``; its stderr ended: …`` with the last lines (credentials cut out), or ``""``."""
        if not self._lines:
            return ""
        from nexus.llm import redact

        last = [" ".join(line.split()) for line in list(self._lines)[-_QUOTED_LINES:]]
        return "; its stderr ended: " + redact(" | ".join(last))
