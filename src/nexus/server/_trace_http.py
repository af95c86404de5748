"""A span per HTTP request, continuing the caller's trace from its W3C ``traceparent`` header.

Installed by ``create_app`` only while tracing is on, inside the token check: a request that is
refused makes no span. The span (kind server, ``{method} {route}``, the route template as the
router found it) is current while the route
runs, so what it does — a message accepted into an agent's queue, a chat completion's run — is
part of the caller's trace. The liveness probe, ``/metrics`` and the web UI's files make none.
"""

from __future__ import annotations

from nexus import telemetry
from nexus.server._guard import ASGIApp, Message, Receive, Scope, Send

UNTRACED = ("/v1/health", "/metrics", "/", "/favicon.ico")
UNTRACED_PREFIXES = ("/ui/",)


class TraceRequests:
    """ASGI middleware: one server span per request (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in UNTRACED or path.startswith(UNTRACED_PREFIXES):
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        traceparent = _header(headers, b"traceparent")
        method = scope.get("method", "GET")
        with telemetry.continue_trace(traceparent, _header(headers, b"tracestate")):
            span = telemetry.start_span(
                method, kind="server", attributes={"http.request.method": method, "url.path": path}
            )
        status: list[int] = []

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            with telemetry.use_span(span):
                await self._app(scope, receive, watched_send)
        except BaseException as exc:
            span.fail(type(exc).__name__)
            raise
        finally:
            route = getattr(scope.get("route"), "path", None)  # the router put it there
            if route:
                span.set_name(f"{method} {route}")
                span.set_attribute("http.route", route)
            if status:
                span.set_attribute("http.response.status_code", status[0])
                if status[0] >= 500:
                    span.fail(str(status[0]))
            span.end()


def _header(headers: dict[bytes, bytes], name: bytes) -> str | None:
    value = headers.get(name)
    return value.decode("latin-1") if value else None
