"""The CLI's side of a running ``nexus serve``: one JSON request, errors turned into CLI errors.

``nexus send``, ``nexus queue clear`` and ``nexus agents add`` use it when :func:`find_server`
finds a server for the same ``$NEXUS_HOME``: the server's broker then learns of the change at
once (a message runs now, not at the broker's next start). Light: httpx only.
"""

from __future__ import annotations

from typing import Any

from nexus.errors import NexusError, UsageError
from nexus.server.discovery import RunningServer

TIMEOUT_S = 30.0


class NoAnswerError(NexusError):
    """The running server did not answer (a timeout, a connection refused or cut): what was asked may or may
    not have been done."""


def call_server(server: RunningServer, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """``method path`` on the server; a 4xx is a UsageError (exit 2), no answer or a 5xx a NexusError (exit 1).

    A 4xx refuses the request (a full queue, an unknown agent), not the configuration: the CLI printed
    ``nexus: config error: nexus serve refused it (400): … the queue is full``, which sent users to nexus.toml."""
    import httpx

    headers = {"authorization": f"Bearer {server.token}"} if server.token else {}
    try:
        response = httpx.request(method, server.url + path, json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise NoAnswerError(
            f"the running nexus serve at {server.url} (pid {server.pid}) did not answer: {exc}"
        ) from None
    if response.status_code >= 400:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        error = UsageError if response.status_code < 500 else NexusError
        raise error(f"nexus serve refused it ({response.status_code}): {message}")
    return response.json() if response.content else None
