"""``/mcp`` on ``nexus serve``: the MCP face (:mod:`nexus.server._mcp_face`) over streamable HTTP.

The route sits inside the API application, so every guard of the API applies to it unchanged:
bearer tokens, the body limit, and the checks on ``Host`` and ``Origin`` (the SDK's own
DNS-rebinding check is turned off: ours decides, with the same ``[server]`` settings as for every
other route). The SDK's session manager needs a task group that lives as long as the server; it is
started by the first request and stopped by :meth:`McpEndpoint.close` at shutdown.

Without the ``mcp`` extra the route answers 501 saying what to install.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus.server._state import ServerState

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

PATH = "/mcp"


class McpEndpoint:
    """The ASGI app behind ``/mcp`` (see the module docstring)."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._manager: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._ensure()
        except ModuleNotFoundError:
            await _unavailable(send)
            return
        await self._manager.handle_request(scope, receive, send)

    async def _ensure(self) -> None:
        if self._started is not None and self._started.done():
            return
        async with self._lock:
            if self._started is None:
                from mcp.server.transport_security import TransportSecuritySettings

                from nexus.server._mcp_face import build_face

                face = build_face(self._state)
                face.streamable_http_app(
                    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
                )
                self._manager = face.session_manager
                loop = asyncio.get_running_loop()
                self._started = loop.create_future()
                self._owner = loop.create_task(self._run(self._started), name="nexus-mcp-http")
            await asyncio.shield(self._started)

    async def _run(self, started: asyncio.Future[None]) -> None:
        async with self._manager.run():
            started.set_result(None)
            await self._stop.wait()

    async def close(self) -> None:
        """End every MCP session (their streams close) and the session manager's task group."""
        self._stop.set()
        if self._owner is not None:
            await asyncio.gather(self._owner, return_exceptions=True)


async def _unavailable(send: Send) -> None:
    from nexus.server._guard import reply_error

    await reply_error(send, 501, "not_implemented", "/mcp needs the mcp extra: pip install 'nexus-broker[mcp]'")


def mount(app: Any, state: ServerState) -> McpEndpoint:
    """Add ``/mcp`` to the FastAPI ``app`` (GET, POST and DELETE, as streamable HTTP uses them)."""
    from starlette.routing import Route

    endpoint = McpEndpoint(state)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    state.mcp = endpoint
    return endpoint
