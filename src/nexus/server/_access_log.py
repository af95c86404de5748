"""One log line per request (``GET /v1/sessions 200 3.1 ms``), at info on the ``nexus.server.access`` logger.

Only the method, the path (never the query string), the status and the time are logged: no header
(the bearer token is one), no body, no query (a search can hold what a user typed). The line is
written when the response ends, so an event stream's line comes when its client leaves and its time
is how long it was open. Nothing is formatted while the logger is off (``nexus serve --quiet``, or an
app embedded without logging set up).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from nexus.server._guard import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("nexus.server.access")


class AccessLog:
    """ASGI middleware: times each HTTP request and logs it once its response is complete (or cut)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, timed_send)
        finally:
            took = (time.perf_counter() - started) * 1000
            path = _printable(scope.get("path", ""))
            fields = {"event": "request", "method": scope["method"], "path": path, "status": status or None,
                      "duration_ms": round(took, 1)}  # fmt: skip
            log.info("%s %s %s %.1f ms", scope["method"], path, status or "-", took, extra={"fields": fields})


def _printable(path: str) -> str:
    """The path with control characters escaped: a request cannot write a fake line into the log."""
    return path if path.isprintable() else path.encode("unicode_escape").decode("ascii")


def log_requests_to_stderr() -> Any:
    """Send the access lines to stderr (``nexus serve: GET / 200 1.2 ms``); returns the handler to remove."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("nexus serve: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return handler
