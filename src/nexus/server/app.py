"""``create_app``: the FastAPI application of ``nexus serve`` (OpenAPI at ``/docs``).

FastAPI is imported only here, when a server is built: ``import nexus`` and the other
commands never pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from nexus import __version__, telemetry
from nexus.config import ServerConfig
from nexus.ledger import LedgerError
from nexus.server._access_log import AccessLog
from nexus.server._browser_guard import BrowserGuard
from nexus.server._errors import install_error_handlers
from nexus.server._event_hub import EventHub
from nexus.server._guard import Guard
from nexus.server._hosts import HostRules
from nexus.server._openapi import answers, install_openapi
from nexus.server._schemas import Health
from nexus.server._state import ServerState

PROBED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

HEALTH_WAIT_S = 2.0
"""How long ``GET /v1/health`` waits for the ledger before it answers 503: well inside a liveness probe's
timeout, where a store call would wait ``NEXUS_DB_WAIT_S`` (60 s) for a lost database."""

HEALTH_RETRY_S = 5
"""The ``Retry-After`` of an unhealthy answer."""


def create_app(state: ServerState, config: ServerConfig | None = None, *, metrics_tokens: Sequence[str] = ()) -> Any:
    """The ASGI application: routes, error shape, bearer tokens, body limit and CORS from ``config``.

    Builds ``state.events`` from ``config`` when the caller gave no hub. SSE streams never end on
    their own: at shutdown call ``state.events.close()`` before stopping uvicorn. ``metrics_tokens``
    are accepted for ``/metrics`` only (``[telemetry] metrics_token``); ``/metrics`` answers while
    ``nexus.telemetry`` metrics are on, and every request is a span while tracing is on.
    """
    from nexus.server import _agent_messages, _agents, _docs, _events, _metrics, _session_edit, _sessions, _ui

    settings = config or ServerConfig()
    if state.events is None:
        state.events = EventHub(
            retention_events=settings.events_retention_count,
            retention_seconds=settings.events_retention_seconds,
            retention_total_bytes=settings.events_retention_total_bytes,
            heartbeat_seconds=settings.events_heartbeat_seconds,
        )
    app = FastAPI(
        title="Nexus broker",
        version=__version__,
        description="Agents, sessions and their turn trees over HTTP. Errors are `{error: {type, message}}`.",
        docs_url=None,  # our own /docs: a pinned Swagger UI under a strict CSP (nexus.server._docs)
        redoc_url=None,
    )
    app.state.nexus = state
    install_error_handlers(app)
    install_openapi(app)

    @app.get(
        "/v1/health",
        tags=["health"],
        summary="Liveness: the server is up and its ledger answers (and can be written)",
        responses={**answers(Health), 503: {"model": Health, "description": "the ledger's database does not answer"}},
    )
    async def health() -> Any:
        return await _health(state)

    app.include_router(_sessions.router)
    app.include_router(_session_edit.router)
    app.include_router(_agents.router)
    app.include_router(_agent_messages.router)
    app.include_router(_events.router)
    app.include_router(_metrics.router)
    from nexus.server import mcp_http

    mcp_http.mount(app, state)  # /mcp: the MCP face, behind the same guards as every route
    _ui.mount(app)
    _docs.mount(app)
    _include_serve_routes(app)
    app.state.route_methods = route_methods(app)  # OPTIONS' and 405's Allow
    return _middleware(app, settings, metrics_tokens)


async def _health(state: ServerState) -> Any:
    """``ok``; ``degraded`` while the ledger cannot be written (a full disk); 503 when it does not answer."""
    try:
        await state.ledger.check(HEALTH_WAIT_S)
    except LedgerError as exc:
        down = Health(status="unavailable", version=__version__, ledger="unreachable", detail=str(exc))
        return JSONResponse(down.model_dump(), status_code=503, headers={"Retry-After": str(HEALTH_RETRY_S)})
    problem = state.ledger.write_problem()
    if problem is not None:
        detail = f"{problem}: reads work, writes answer 503 until it is fixed"
        return {"status": "degraded", "version": __version__, "ledger": "read_only", "detail": detail}
    return {"status": "ok", "version": __version__, "ledger": "ok"}


def _middleware(app: FastAPI, settings: ServerConfig, metrics_tokens: Sequence[str]) -> Any:
    """The access log, then Host/Origin/media-type checks, then CORS, then tokens and the body limit, then a span,
    then the routes.

    CORS sits before the token check: a browser's preflight never carries ``Authorization``,
    and a 401 must carry ``Access-Control-Allow-Origin`` for the page to read it.
    """
    routes: Any = app
    if telemetry.tracing():
        from nexus.server._trace_http import TraceRequests

        routes = TraceRequests(app)
    inner: Any = Guard(
        routes, tokens=settings.tokens, max_body_bytes=settings.max_body_bytes, metrics_tokens=metrics_tokens
    )
    if settings.cors_origins:
        from nexus.server._cors import ApiCors

        inner = ApiCors(
            inner,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "HEAD", "POST", "PATCH", "DELETE"],
            allow_headers=["authorization", "content-type", "last-event-id", "x-nexus-session"],
            expose_headers=["x-nexus-session", "x-nexus-turn-id"],
        )
    rules = HostRules(
        bound_host=settings.host, allowed_hosts=list(settings.allowed_hosts), cors_origins=list(settings.cors_origins)
    )
    return AccessLog(BrowserGuard(inner, rules, app.state.route_methods, cors=bool(settings.cors_origins)))


def route_methods(app: FastAPI) -> Callable[[str], set[str]]:
    """The HTTP methods ``app`` answers at a path (for ``OPTIONS``' ``Allow``); empty when no route matches.

    Asks each route whether it fully matches the path with each method (``BaseRoute.matches``, the
    router's own test), so included routers and mounts answer for themselves.
    """
    from starlette.routing import Match

    def methods_for(path: str) -> set[str]:
        return {
            method
            for method in PROBED_METHODS
            if any(
                route.matches({"type": "http", "path": path, "method": method, "root_path": ""})[0] is Match.FULL
                for route in app.router.routes
            )
        }

    return methods_for


def _include_serve_routes(app: FastAPI) -> None:
    """Messages, abort/interrupt and the OpenAI-compatible facade (they use the broker when it runs here)."""
    from nexus.server import _messages, _openai, _routing

    app.include_router(_messages.router)
    app.include_router(_routing.router)
    app.include_router(_openai.router)
