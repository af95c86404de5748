"""From a ``[mcp.servers.<name>]`` table to the SDK transport that reaches the server.

``${VAR}`` references are resolved here, when the server starts, not when the config loads (a
command that never starts the server never needs its variables). Every value that lands in a
started program's environment or in an HTTP header is registered with
:func:`nexus.llm.redact.add_secrets`, so no error text or log line repeats it; what is shown of a
server is its name and argv (``describe``), which never holds a credential (the config refuses
``${TOKEN}``-like references in ``args``).

The SDK is imported only inside :func:`open_transport`, when a connection is being made.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nexus.config import McpServerConfig, McpTransport, resolve_env
from nexus.llm import add_secrets

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams


@dataclass(slots=True, frozen=True)
class ServerLaunch:
    """A server's settings with every ``${VAR}`` resolved: what one connection attempt uses."""

    name: str
    kind: McpTransport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """What the server is, for messages: its argv or its URL (never its environment or headers)."""
        if self.kind == "stdio":
            return " ".join([self.command, *self.args])
        return self.url


def resolve_launch(name: str, server: McpServerConfig, home: Path, workspace: Path) -> ServerLaunch:
    """``server`` with its ``${VAR}`` references resolved (ConfigError naming an unset one).

    A command server runs in ``cwd`` (relative to ``home``), by default the agents' ``workspace``.
    """
    where = f"mcp.servers.{name}"

    def sub(value: str, key: str) -> str:
        return resolve_env(value, os.environ, f"{where}.{key}")

    if server.kind != "stdio":
        assert server.url is not None
        headers = {key: sub(value, f"headers.{key}") for key, value in server.headers.items()}
        add_secrets(headers.values())
        return ServerLaunch(name, server.kind, url=sub(server.url, "url"), headers=headers)
    assert server.command is not None
    env = {key: sub(value, f"env.{key}") for key, value in server.env.items()}
    add_secrets(env.values())
    if server.cwd is None:
        cwd = workspace
        cwd.mkdir(parents=True, exist_ok=True)  # the agents' workspace (a run would create it too)
    else:
        cwd = Path(sub(server.cwd, "cwd")).expanduser()
        cwd = cwd if cwd.is_absolute() else home / cwd
    return ServerLaunch(
        name,
        "stdio",
        command=sub(server.command, "command"),
        args=tuple(sub(arg, "args") for arg in server.args),
        env=env,
        cwd=str(cwd),
    )


@contextlib.asynccontextmanager
async def open_transport(
    launch: ServerLaunch,
    on_stderr: Callable[[bytes], None],
    on_response: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncIterator[TransportStreams]:
    """The SDK transport for ``launch``; a started program's stderr goes to ``on_stderr`` line by line, and
    each response of a streamable-HTTP server to ``on_response`` (the SDK's errors drop its status)."""
    if launch.kind == "stdio":
        async with _stdio(launch, on_stderr) as streams:
            yield streams
        return
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=launch.headers or None) as http:
        if on_response is not None:
            http.event_hooks["response"].append(on_response)
        if launch.kind == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(launch.url, headers=launch.headers or None) as streams:
                yield streams
        else:
            from mcp.client.streamable_http import streamable_http_client

            async with streamable_http_client(launch.url, http_client=http) as streams:
                yield streams


@contextlib.asynccontextmanager
async def _stdio(launch: ServerLaunch, on_stderr: Callable[[bytes], None]) -> AsyncIterator[TransportStreams]:
    """The SDK's stdio transport with the program's stderr read through a pipe of our own.

    The SDK would hand the program our stderr; a pipe lets its lines be logged and its last words
    quoted when it fails to start or dies.
    """
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=launch.command, args=list(launch.args), env=launch.env, cwd=launch.cwd)
    read_fd, write_fd = os.pipe()
    reader = _StderrReader(read_fd, on_stderr)
    errlog = os.fdopen(write_fd, "wb", buffering=0)
    try:
        async with stdio_client(params, errlog=errlog) as streams:  # type: ignore[arg-type]
            errlog.close()  # the program has its copy: the reader sees EOF when the program exits
            reader.start()
            yield streams
    finally:
        errlog.close()
        await reader.stop()


class _StderrReader:
    """Reads a started program's stderr pipe in the event loop and hands on each line."""

    def __init__(self, fd: int, on_line: Callable[[bytes], None]) -> None:
        self._fd = fd
        self._on_line = on_line
        self._task: Any = None

    def start(self) -> None:
        import asyncio

        self._task = asyncio.get_running_loop().create_task(self._read(), name="mcp-stderr")

    async def _read(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 16)
        pipe = os.fdopen(self._fd, "rb", buffering=0)
        self._fd = -1
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # a line over the limit: drop what is buffered and go on
                    line = b"[line too long]\n"
                    await reader.read(1 << 16)
                if not line:
                    return
                self._on_line(line.rstrip(b"\r\n"))
        finally:
            transport.close()

    async def stop(self) -> None:
        """Stop reading (what the program wrote before it ended is still handed on, within 1 s)."""
        import asyncio

        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if not done:
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
