"""One MCP server for the whole process: started on first need, shared by every run, supervised.

The SDK's ``Client`` is an anyio context manager: it must be entered and left by the same task.
So each connection attempt runs in an *owner* task that enters the client, lists the tools, says
it is ready and then waits; runs call tools from their own tasks (the SDK multiplexes requests
over the one connection, so 100 calls do not queue behind each other). The owner's cancel scope
carries the start deadline, and cancelling it is how a connection is closed: the SDK's shutdown
(close stdin, SIGTERM, SIGKILL, each bounded) runs under anyio's shield.

How it ends is seen at once: the read stream is watched (:mod:`._watch`), so a server that exits
or drops its stream marks the connection lost while it happens; calls in flight get the SDK's
"connection closed" and become tool errors, and the next call starts the server again after its
backoff (:mod:`._backoff`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from nexus.errors import NexusError
from nexus.llm import AbortSignal
from nexus.mcp._backoff import Backoff, RestartPolicy
from nexus.mcp._launch import ServerLaunch, open_transport
from nexus.mcp._refusal import HttpRefusal, start_refusal
from nexus.mcp._watch import StderrTail, WatchedRead

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

    from mcp import Client

log = logging.getLogger("nexus.mcp")

ConnectionState: TypeAlias = Literal["idle", "starting", "ready", "lost", "stopped"]

ProgressFn: TypeAlias = Callable[[float, float | None, str | None], None]

_LIST_PAGES = 100
"""A tool listing longer than this many pages is cut there (a paginator that never ends cannot hang a start)."""


class McpError(NexusError):
    """An MCP server could not be used; the message names it, says what happened and what happens next."""


class McpAborted(McpError):
    """The run was aborted while the call was in flight (the server was told to cancel it)."""


class ServerConnection:
    """One server, one connection at a time, shared by every run of the process (see the module docstring).

    ``launch`` resolves the server's settings at each start (``${VAR}`` may change between starts).
    """

    def __init__(
        self,
        name: str,
        launch: Callable[[], ServerLaunch],
        *,
        timeout_s: float,
        start_timeout_s: float,
        policy: RestartPolicy | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.state: ConnectionState = "idle"
        self.tools: list[Tool] = []
        """The server's tools as last listed (kept across restarts: runs go on offering them)."""
        self.listed = False
        self.version = 0
        """Bumped at every new listing (the tools of runs that start later follow it)."""
        self.last_error: str | None = None
        self.described = name
        self.on_listing: Callable[[ServerConnection], None] | None = None
        self._launch = launch
        self._backoff = Backoff(policy or RestartPolicy(), clock) if clock else Backoff(policy or RestartPolicy())
        self._stderr = StderrTail(name)
        self._client: Client | None = None
        self._scope: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None
        self._refresh_again = False
        self._ended = False
        self._greeted = False
        """The MCP handshake of the current attempt was answered (a "Method not found" after it is the listing's)."""
        self._refused = HttpRefusal()
        self.garbage = 0
        self._last_garbage = ""

    # ------------------------------------------------------------------ start

    async def ensure(self, signal: AbortSignal | None = None) -> Client:
        """The connected client, starting the server if it is not running (McpError when it cannot be)."""
        client = self._client
        if client is not None and self.state == "ready":
            return client
        started: Client = await _unless_aborted(
            self._ensure_locked(), signal, f"waiting for MCP server {self.name} to start"
        )
        return started

    async def _ensure_locked(self) -> Client:
        async with self._lock:
            if self._client is not None and self.state == "ready":
                return self._client
            if self.state == "stopped":
                raise McpError(f"MCP server {self.name} is stopped (nexus is shutting down)")
            wait = self._backoff.wait_left()
            if wait > 0:
                raise McpError(self._waiting_message(wait))
            await self._start()
            assert self._client is not None
            return self._client

    def _waiting_message(self, wait: float) -> str:
        last = f" (last: {self.last_error})" if self.last_error else ""
        if self._backoff.gave_up:
            return (
                f"MCP server {self.name} gave up after {self._backoff.deaths - 1} restarts{last}; fix the server "
                f"({self.described}); nexus tries to start it again in {wait:.0f} s"
            )
        return f"MCP server {self.name} is not running{last}; it is started again in {wait:.1f} s"

    async def _start(self) -> None:
        await self._close_owner()
        loop = asyncio.get_running_loop()
        self._ready = ready = loop.create_future()
        self.state = "starting"
        self._stderr.clear()
        self._owner = loop.create_task(self._own(ready), name=f"nexus-mcp-{self.name}")
        try:
            await asyncio.shield(ready)
        except McpError:
            self.state = "lost"
            self._backoff.died()
            raise
        self.state = "ready"
        self.last_error = None
        self._backoff.started()

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """The owner task of one connection attempt (see the module docstring)."""
        import anyio

        self._ended = self._greeted = False
        self._refused.clear()
        self.garbage = 0
        try:
            launch = self._launch()
            self.described = launch.describe()
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout_s) as scope:
                self._scope = scope
                await self._connect(launch, scope, ready)
            if scope.cancelled_caught and not ready.done():
                noise = f" and wrote {self.garbage} line(s) that are not MCP (last: {self._last_garbage})"
                why = f"it did not finish starting within {self.start_timeout_s:g} s{noise if self.garbage else ''}"
                ready.set_exception(self._start_error(why))
        except Exception as exc:
            if not ready.done():
                ready.set_exception(self._start_error(self._start_failure(exc)))
            else:
                log.warning("MCP server %s: connection ended: %s", self.name, _one_line(exc))
        finally:
            self._client = None
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {self.name} stopped while it was starting"))
            if self.state == "ready":
                self._lost("the connection ended")

    async def _connect(self, launch: ServerLaunch, scope: Any, ready: asyncio.Future[None]) -> None:
        from mcp.types import Implementation

        from mcp import Client
        from nexus import __version__

        _quiet_sdk_log()
        async with Client(
            self._transport(launch),
            message_handler=self._on_message,
            cache=None,
            client_info=Implementation(name="nexus", version=__version__),
        ) as client:
            self._greeted = True
            await self._list(client)
            scope.deadline = math.inf
            self._client = client
            ready.set_result(None)
            await self._watch_listing(client)

    def _transport(self, launch: ServerLaunch) -> Any:
        import contextlib

        @contextlib.asynccontextmanager
        async def watched() -> Any:
            async with open_transport(launch, self._stderr, self._refused.hook) as (read, write):
                yield WatchedRead(read, self._on_end, self._on_garbage), write

        return watched()

    def _start_failure(self, exc: BaseException) -> str:
        """Why a start failed, in a few words (the error message adds who and what next)."""
        if isinstance(exc, NexusError):  # e.g. an unset ${VAR}: its message says what to do
            return str(exc)
        if isinstance(exc, FileNotFoundError):
            return f"{exc.strerror}: {exc.filename}"
        if isinstance(exc, ImportError) and (exc.name or "").split(".")[0] in ("mcp", "mcp_types"):
            return "the mcp package is not installed: pip install 'nexus-broker[mcp]'"
        refusal = start_refusal(exc, self._refused, self._greeted)
        if refusal is not None:
            return refusal
        if self._ended:
            return "it closed the connection during the handshake (exited?)"
        return _one_line(exc)

    def _start_error(self, why: str) -> McpError:
        self.last_error = why
        return McpError(f"MCP server {self.name} ({self.described}) could not start: {why}{self._stderr.quote()}")

    # ------------------------------------------------------------------ tool listing

    async def _list(self, client: Client) -> None:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tools
        self.listed = True
        self.version += 1
        if self.on_listing is not None:
            self.on_listing(self)

    async def _watch_listing(self, client: Client) -> None:
        """Wait for the connection's end; on a 2026-era connection, follow tool-list changes with ``listen``."""
        import anyio
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        tools = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or tools is None or not tools.list_changed:
            await anyio.sleep_forever()
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._schedule_refresh()
        except Exception as exc:  # the stream dropped: the connection is going or gone
            log.debug("MCP server %s: tool-list subscription ended: %s", self.name, _one_line(exc))
        await anyio.sleep_forever()

    async def _on_message(self, message: Any) -> None:
        from mcp.types import LoggingMessageNotification, ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._schedule_refresh()
        elif isinstance(message, LoggingMessageNotification):
            log.debug("MCP server %s log: %s", self.name, message.params.data)

    def _schedule_refresh(self) -> None:
        if self._refresh is not None and not self._refresh.done():
            self._refresh_again = True
            return
        self._refresh = asyncio.get_running_loop().create_task(self._relist(), name=f"nexus-mcp-{self.name}-list")

    async def _relist(self) -> None:
        while True:
            self._refresh_again = False
            client = self._client
            if client is None:
                return
            try:
                await asyncio.wait_for(self._list(client), self.timeout_s)
            except Exception as exc:
                log.warning("MCP server %s: tool list not refreshed: %s", self.name, _one_line(exc))
            if not self._refresh_again:
                return

    # ------------------------------------------------------------------ calls

    async def call(
        self, tool: str, arguments: dict[str, Any], signal: AbortSignal, on_progress: ProgressFn | None = None
    ) -> CallToolResult:
        """Call ``tool``; McpError (McpAborted on abort) for everything that is not a result."""
        import anyio

        client = await self.ensure(signal)
        garbage = self.garbage
        progress = _progress_callback(on_progress)
        with anyio.CancelScope() as scope:
            remove = signal.add_listener(scope.cancel)
            try:
                return await client.call_tool(
                    tool, arguments, read_timeout_seconds=self.timeout_s, progress_callback=progress
                )
            except Exception as exc:
                raise self._call_failure(tool, exc, garbage) from None
            finally:
                remove()
        raise McpAborted(f"{signal.reason or 'aborted'}: the call to {tool} was cancelled (MCP server {self.name})")

    def _call_failure(self, tool: str, exc: Exception, garbage_before: int) -> McpError:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        prefix = f"MCP server {self.name}"
        if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            self._lost("it closed the connection")
            return McpError(
                f"{prefix} closed the connection during the call to {tool}{self._stderr.quote()}; "
                "it is started again on the next call"
            )
        if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
            noise = self.garbage - garbage_before
            if noise:
                self._lost(f"it wrote {noise} line(s) that are not MCP instead of answering")
                return McpError(
                    f"{prefix} did not answer {tool} within {self.timeout_s:g} s and wrote {noise} line(s) that "
                    f"are not MCP (last: {self._last_garbage}); it is restarted on the next call"
                )
            return McpError(f"{prefix} did not answer {tool} within {self.timeout_s:g} s; the call was cancelled")
        if isinstance(exc, MCPError):
            return McpError(f"{prefix} refused the call to {tool}: {exc.error.message} (error {exc.code})")
        if isinstance(exc, ValidationError):
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in exc.errors()[:3])
            return McpError(f"{prefix} answered {tool} with a result that is not MCP ({problems})")
        if isinstance(exc, RuntimeError):  # the SDK's check of structured content against the output schema
            return McpError(f"{prefix}: {tool}: {exc}")
        self._lost(_one_line(exc))
        return McpError(f"{prefix}: the call to {tool} failed: {_one_line(exc)}; it is restarted on the next call")

    # ------------------------------------------------------------------ losing and stopping

    def _on_end(self) -> None:
        self._ended = True
        if self.state == "ready":
            self._lost("it closed the connection")

    def _on_garbage(self, item: Exception) -> None:
        self.garbage += 1
        self._last_garbage = _garbage_text(item)
        if self.garbage in (1, 2, 3, 10, 100) or self.garbage % 1000 == 0:
            log.warning("MCP server %s wrote a line that is not MCP (%d so far): %s", self.name, self.garbage,
                        self._last_garbage)  # fmt: skip

    def _lost(self, why: str) -> None:
        """The connection is gone or unusable: count a death; the next call starts the server again."""
        if self.state != "ready":
            return
        self.state = "lost"
        self.last_error = why
        self._client = None
        self._backoff.died()
        log.warning("MCP server %s: %s; it is started again on the next call", self.name, why)
        if self._scope is not None:
            self._scope.cancel()

    async def _close_owner(self) -> None:
        owner, self._owner = self._owner, None
        if self._scope is not None:
            self._scope.cancel()
        if owner is not None:
            await asyncio.gather(owner, return_exceptions=True)
        self._scope = None

    async def stop(self) -> None:
        """Close the connection (the server process is stopped) and start it no more."""
        self.state = "stopped"
        self._client = None
        refresh = self._refresh
        if refresh is not None:
            refresh.cancel()
            await asyncio.gather(refresh, return_exceptions=True)
        await self._close_owner()

    def status(self) -> dict[str, Any]:
        """State, tool count and last error, for ``nexus mcp list`` and the server's status page."""
        return {
            "name": self.name,
            "state": "failed" if self._backoff.gave_up else self.state,
            "tools": len(self.tools),
            "last_error": self.last_error,
            "restarts": self._backoff.deaths,
        }


def _progress_callback(on_progress: ProgressFn | None) -> Any:
    if on_progress is None:
        return None

    async def progress(value: float, total: float | None, message: str | None) -> None:
        on_progress(value, total, message)

    return progress


async def _unless_aborted(coro: Any, signal: AbortSignal | None, what: str) -> Any:
    """``await coro``, unless ``signal`` aborts first (McpAborted; the coroutine goes on for others)."""
    if signal is None:
        return await coro
    if signal.aborted:
        coro.close()
        raise McpAborted(f"{signal.reason or 'aborted'} before {what}")
    task = asyncio.ensure_future(coro)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        return task.result()
    task.add_done_callback(_ignore_result)
    raise McpAborted(f"{signal.reason or 'aborted'} while {what}")


def _ignore_result(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _garbage_text(exc: Exception) -> str:
    """The line a server wrote that is not JSON-RPC (the SDK hands over the parse error), quoted."""
    errors = getattr(exc, "errors", None)
    line = errors()[0].get("input") if callable(errors) and errors() else None
    if isinstance(line, str):
        from nexus.llm import redact

        return repr(redact(line)[:120])  # redacted whole: a cut key goes unseen
    return _one_line(exc)[:200]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, BaseExceptionGroup):
        text = "; ".join(_one_line(inner) for inner in exc.exceptions)
    from nexus.llm import redact

    return redact(text)[:500]


def _quiet_sdk_log() -> None:
    """The SDK logs tracebacks for what :class:`ServerConnection` reports in its own words (a line that is
    not MCP, a connection that closed); its logger is kept to CRITICAL unless the user set a level."""
    sdk = logging.getLogger("mcp")
    if sdk.level == logging.NOTSET:
        sdk.setLevel(logging.CRITICAL)
