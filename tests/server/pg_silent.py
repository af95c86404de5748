"""A TCP proxy in front of the tests' real PostgreSQL that can go silent: :meth:`SilentProxy.silence` stops
forwarding in both directions while every connection stays open, as a stopped (``SIGSTOP``) server or a proxy
that hangs does. A statement already on the wire then never gets its answer, and a new connection is accepted
but never greeted. :meth:`SilentProxy.close` cuts every connection (the server then rolls back what was open).

It runs on an asyncio loop of its own thread, so the test's own code may block."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")

CALL_S = 10.0
"""How long a call from the test's thread waits for the proxy's loop to do it."""


class SilentProxy:
    """Forward 127.0.0.1:<port> to the server of ``url``; :attr:`url` is ``url`` through the proxy."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pg-silent-proxy", daemon=True)
        self._thread.start()
        self._writers: list[asyncio.StreamWriter] = []
        self._forwarding = self._call(self._event())
        self._server = self._call(asyncio.start_server(self._accepted, "127.0.0.1", 0))
        port = int(self._server.sockets[0].getsockname()[1])
        netloc = f"{parts.username}@127.0.0.1:{port}" if parts.username else f"127.0.0.1:{port}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(CALL_S)

    @staticmethod
    async def _event() -> asyncio.Event:
        forwarding = asyncio.Event()
        forwarding.set()
        return forwarding

    async def _accepted(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._writers.append(client_writer)
        await self._forwarding.wait()  # a connection made while silent waits, unanswered
        try:
            server_reader, server_writer = await asyncio.open_connection(*self._target)
        except OSError:
            client_writer.close()
            return
        self._writers.append(server_writer)
        await asyncio.gather(self._pump(client_reader, server_writer), self._pump(server_reader, client_writer))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        forwarding = self._forwarding
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await forwarding.wait()  # silent: what was read is held, and nothing more is read
                writer.write(data)
                await writer.drain()
        writer.close()

    def silence(self) -> None:
        """Stop forwarding from now on, both ways; connections stay open."""

        async def clear() -> None:
            self._forwarding.clear()

        self._call(clear())

    def close(self) -> None:
        """Cut every connection and stop listening."""
        if not self._loop.is_running():
            return

        async def cut() -> None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:  # the pumps, and the connections held unanswered
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        self._call(cut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CALL_S)

    def __enter__(self) -> SilentProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
