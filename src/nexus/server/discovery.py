"""``$NEXUS_HOME/server.json``: how the CLI finds a ``nexus serve`` running for the same ledger.

``nexus serve`` writes the file (mode 0600: it names a local port that may need a token) once it
listens, and removes it on a clean shutdown. A reader trusts it only while its process is alive
and holds the broker lock, so a file left by a killed server is ignored. Light on purpose: the
CLI imports it on every ``nexus send``; no FastAPI here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig

FILE_NAME = "server.json"


@dataclass(frozen=True, slots=True)
class RunningServer:
    """A live ``nexus serve``: where to reach it and the token to use (``None``: no auth configured)."""

    pid: int
    url: str
    token: str | None


def server_file(config: NexusConfig) -> Path:
    """Where this configuration's server announces itself (beside the ledger and its broker lock)."""
    return config.database_path.with_name(FILE_NAME)


def write_server_file(config: NexusConfig, host: str, port: int) -> Path:
    """Announce this process as the server (atomically, 0600)."""
    path = server_file(config)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"pid": os.getpid(), "host": host, "port": port}, out)
    os.replace(tmp, path)
    return path


def remove_server_file(config: NexusConfig) -> None:
    """Withdraw the announcement, if it is still this process's."""
    path = server_file(config)
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def find_server(config: NexusConfig) -> RunningServer | None:
    """The server running for this ``$NEXUS_HOME``, or ``None`` (no file, a dead process, a garbled file)."""
    try:
        data = json.loads(server_file(config).read_text(encoding="utf-8"))
        pid, host, port = int(data["pid"]), str(data["host"]), int(data["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(pid) or not _holds_lock(config):
        return None
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return RunningServer(pid, f"http://{host}:{port}", _token(config))


def _alive(pid: int) -> bool:
    from nexus.ledger._crash import pid_alive

    return pid_alive(pid)


def _holds_lock(config: NexusConfig) -> bool:
    """True when some process holds the broker lock (the server does while it runs)."""
    from nexus.broker.host import broker_lock

    with broker_lock(config) as free:
        return not free


def _token(config: NexusConfig) -> str | None:
    from nexus.config._env import resolve_env

    for token in config.server.tokens:
        value = resolve_env(token, os.environ, "[server] tokens")
        if value:
            return value
    return None
