"""``nexus serve``: the ledger and the broker over HTTP (DESIGN §4.7; docs/server.md).

Import :func:`create_app` from :mod:`nexus.server.app` (FastAPI loads only then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute

if TYPE_CHECKING:
    from nexus.server._mcp_face import build_face
    from nexus.server._state import ServerState
    from nexus.server._views import item_turns, queue_item_views, turn_error_text
    from nexus.server.client import NoAnswerError, call_server
    from nexus.server.discovery import RunningServer, find_server
    from nexus.server.serve import serve_http

_LAZY: dict[str, str] = {
    "NoAnswerError": "nexus.server.client",
    "RunningServer": "nexus.server.discovery",
    "ServerState": "nexus.server._state",
    "build_face": "nexus.server._mcp_face",
    "call_server": "nexus.server.client",
    "find_server": "nexus.server.discovery",
    "item_turns": "nexus.server._views",
    "queue_item_views": "nexus.server._views",
    "serve_http": "nexus.server.serve",
    "turn_error_text": "nexus.server._views",
}

__all__ = [
    "NoAnswerError",
    "RunningServer",
    "ServerState",
    "build_face",
    "call_server",
    "find_server",
    "item_turns",
    "queue_item_views",
    "serve_http",
    "turn_error_text",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, globals(), name)
