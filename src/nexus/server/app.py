"""``create_app``: the FastAPI application of ``nexus serve`` (OpenAPI at ``/docs``).

FastAPI is imported only here, when a server is built: ``import nexus`` and the other
commands never pay for it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from nexus import __version__
from nexus.config._server_schema import ServerConfig
from nexus.server._errors import install_error_handlers
from nexus.server._event_hub import EventHub
from nexus.server._guard import Guard
from nexus.server._state import ServerState


def create_app(state: ServerState, config: ServerConfig | None = None) -> Any:
    """The ASGI application: routes, error shape, bearer tokens, body limit and CORS from ``config``.

    Builds ``state.events`` from ``config`` when the caller gave no hub. SSE streams never end on
    their own: at shutdown call ``state.events.close()`` before stopping uvicorn.
    """
    from nexus.server import _agents, _events, _sessions, _ui

    settings = config or ServerConfig()
    if state.events is None:
        state.events = EventHub(
            retention_events=settings.events_retention_count,
            retention_seconds=settings.events_retention_seconds,
            heartbeat_seconds=settings.events_heartbeat_seconds,
        )
    app = FastAPI(
        title="Nexus broker",
        version=__version__,
        description="Agents, sessions and their turn trees over HTTP. Errors are `{error: {type, message}}`.",
    )
    app.state.nexus = state
    install_error_handlers(app)

    @app.get("/v1/health", tags=["health"], summary="Liveness: the server is up and its ledger answers")
    def health() -> dict[str, Any]:
        sessions = len(state.ledger.list_sessions(limit=1))
        return {"status": "ok", "version": __version__, "ledger": "ok" if sessions >= 0 else "error"}

    app.include_router(_sessions.router)
    app.include_router(_agents.router)
    app.include_router(_events.router)
    from nexus.server import mcp_http

    mcp_http.mount(app, state)  # /mcp: the MCP face, behind the same guards as every route
    _ui.mount(app)
    _include_serve_routes(app)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["authorization", "content-type", "last-event-id"],
        )
    return Guard(app, tokens=settings.tokens, max_body_bytes=settings.max_body_bytes)


def _include_serve_routes(app: FastAPI) -> None:
    """Messages, abort/interrupt and the OpenAI-compatible facade (they use the broker when it runs here)."""
    from nexus.server import _messages, _openai

    app.include_router(_messages.router)
    app.include_router(_openai.router)
