"""Pure ASGI middleware in front of every route: bearer tokens and the request-body limit.

Both run before the app reads a byte of the body: a missing token is refused without parsing
anything, and a body over the limit is refused from its ``Content-Length`` or, for a chunked
upload, as soon as the bytes read pass the limit.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from nexus.server._errors import error_json

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = ("/v1/health", "/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
"""Paths that need no token: the liveness probe, the web UI's page and the API's documentation (none holds
data; a browser cannot send a token to open a page: /docs takes one with its Authorize button)."""
OPEN_PREFIXES = ("/ui/",)
"""The web UI's static scripts and styles (no data either)."""
METRICS_PATH = "/metrics"
"""Prometheus metrics: the API's tokens, or a metrics token of its own (``[telemetry] metrics_token``)."""


FACADE_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})
"""The OpenAI facade's paths: a refusal there carries ``code`` and ``param`` as OpenAI's errors do."""
_FACADE_CODES = {"unauthorized": "invalid_api_key"}
"""OpenAI's own ``code`` for a refusal that has one; the others' code is their type."""


async def reply_error(
    send: Send, status: int, error_type: str, message: str, headers: Sequence[tuple[bytes, bytes]] = (), *,
    path: str = "",
) -> None:  # fmt: skip
    """Answer with the API's error shape, before (or instead of) the app (at the facade's ``path``, with a code)."""
    code = _FACADE_CODES.get(error_type, error_type) if path in FACADE_PATHS else None
    body = error_json(error_type, message, code=code)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Checks ``Authorization: Bearer <token>`` (when tokens are configured) and caps body size."""

    def __init__(
        self, app: ASGIApp, *, tokens: Sequence[str], max_body_bytes: int, metrics_tokens: Sequence[str] = ()
    ) -> None:
        """``metrics_tokens`` are accepted for ``/metrics`` only (besides ``tokens``), and then required there."""
        self._app = app
        self._tokens = [token.encode() for token in tokens if token]
        self._metrics_tokens = [token.encode() for token in metrics_tokens if token]
        self._max = max_body_bytes
        self._too_large = f"the request body is larger than {max_body_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if (self._tokens or self._metrics_tokens) and not self._authorized(scope, headers):
            await reply_error(
                send, 401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)",
                [(b"www-authenticate", b"Bearer")], path=scope.get("path", ""),
            )  # fmt: skip
            return
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self._max):
            await reply_error(send, 413, "too_large", self._too_large, path=scope.get("path", ""))
            return
        seen = 0
        started = refused = False

        async def limited_receive() -> Message:
            # Past the limit, the 413 goes out at once and the app is told the client left, so
            # it stops reading; whatever it answers after that is dropped.
            nonlocal seen, started, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._max:
                    refused = True
                    if not started:
                        started = True
                        await reply_error(send, 413, "too_large", self._too_large, path=scope.get("path", ""))
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self._app(scope, limited_receive, tracking_send)

    def _authorized(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        path = scope.get("path", "")
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return True
        accepted = [*self._tokens, *self._metrics_tokens] if path == METRICS_PATH else self._tokens
        if not accepted:  # no token guards this path (a metrics token alone guards /metrics only)
            return True
        value = headers.get(b"authorization", b"")
        scheme, _, token = value.partition(b" ")
        if scheme.lower() != b"bearer" or not token:
            return False
        return any(hmac.compare_digest(token.strip(), known) for known in accepted)
