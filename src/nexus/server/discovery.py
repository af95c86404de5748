"""``$NEXUS_HOME/server.json``: how the CLI finds a ``nexus serve`` running for the same ledger.

``nexus serve`` writes the file (mode 0600: it holds the token this start of the server made, which
the API accepts as long as the process runs) once it listens, and removes it on a clean shutdown.
A reader trusts it only while its process is alive and holds the broker lock, so a file left by a
killed server is ignored (on PostgreSQL, where a server takes no lock, only while its process lives).
Light on purpose: the CLI imports it on every ``nexus send``; no FastAPI.
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
    """Where this configuration's server announces itself (beside the ledger and its broker lock; for a
    PostgreSQL ledger, in the directory of ``$NEXUS_HOME`` its URL names)."""
    url = config.database_url
    if url is not None:
        from nexus.config import database_dir

        return database_dir(url) / FILE_NAME
    return config.database_path.with_name(FILE_NAME)


def write_server_file(config: NexusConfig, host: str, port: int, token: str | None = None) -> Path:
    """Announce this process as the server (atomically, 0600), with its per-start token if it has one."""
    path = server_file(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"pid": os.getpid(), "host": host, "port": port, **({"token": token} if token else {})}, out)
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
    if not _alive(pid) or (config.database_url is None and not _holds_lock(config)):
        return None  # a PostgreSQL server holds no lock (several may share the database): its pid must live
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    token = data.get("token")  # this start's own token; else one from [server] tokens
    return RunningServer(pid, f"http://{host}:{port}", token if isinstance(token, str) and token else _token(config))


def _alive(pid: int) -> bool:
    from nexus.ledger import pid_alive

    return pid_alive(pid)


def _holds_lock(config: NexusConfig) -> bool:
    """True when some process holds the broker lock (the server does while it runs)."""
    from nexus.broker import broker_lock

    with broker_lock(config) as free:
        return not free


def _token(config: NexusConfig) -> str | None:
    from nexus.config import resolve_env

    for token in config.server.tokens:
        value = resolve_env(token, os.environ, "[server] tokens")
        if value:
            return value
    return None
