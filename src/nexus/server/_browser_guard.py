"""The outermost ASGI middleware: what a web page could make a browser send is refused here.

In front of CORS and the token check (``Guard``), in this order:

1. ``Host`` must name this server (DNS rebinding, see ``nexus.server._hosts``): else 403.
2. ``OPTIONS`` is answered here — 204 with ``Allow`` — unless it is a CORS preflight that the CORS
   middleware answers (a preflight never carries a token, so it must not reach the token check).
3. A state-changing request (``POST``, ``PUT``, ``PATCH``, ``DELETE``) with a foreign ``Origin`` is 403.
4. A request body must be JSON (``application/json``; JSON lines, ``application/x-ndjson``, for the session
   import): a body of any other type is 415, so no "simple" cross-site form or ``text/plain`` post is ever parsed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from nexus.config import parse_host
from nexus.server._guard import ASGIApp, Receive, Scope, Send, reply_error
from nexus.server._hosts import HostRules

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_LINES_TYPES = frozenset({"application/x-ndjson", "application/jsonl", "application/json-lines"})
"""Media types of the session import's body, JSON lines: with ``application/json`` the framework parsed a session
file as one JSON document and said "not valid JSON at character 140 (Extra data)", 422, about a good file."""
JSON_TYPES = frozenset({"application/json", *JSON_LINES_TYPES})
"""Media types a request body may have (plus any ``application/…+json``)."""
IMPORT_PATH_END = "/sessions/import"
MethodsFor = Callable[[str], Iterable[str]]
"""The methods a path answers to (none: no such path)."""


@functools.lru_cache(maxsize=64)
def is_json_type(content_type: bytes) -> bool:
    """True for a JSON media type (parameters such as ``charset`` ignored)."""
    media = content_type.split(b";", 1)[0].strip().lower().decode("latin-1")
    return media in JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


class BrowserGuard:
    """Host check, ``OPTIONS``, foreign ``Origin`` and non-JSON bodies, before anything else runs."""

    def __init__(self, app: ASGIApp, rules: HostRules, methods_for: MethodsFor, *, cors: bool) -> None:
        self._app, self._rules, self._methods_for, self._cors = app, rules, methods_for, cors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = parse_host(headers.get(b"host", b"").decode("latin-1"))
        server = scope.get("server")
        if not self._rules.host_allowed(host, server[0] if server else None):
            shown = headers.get(b"host", b"").decode("latin-1")[:100]
            message = (
                f"Host {shown!r} is not a name of this server (a page whose name was pointed at this address?); "
                "if it is yours, add it to [server] allowed_hosts in nexus.toml"
            )
            await reply_error(send, 403, "forbidden", message, path=scope["path"])
            return
        method = scope["method"]
        if method == "OPTIONS" and not (self._cors and _is_preflight(headers)):
            await self._options(scope, send)
            return
        if method not in SAFE_METHODS:
            origin = headers.get(b"origin")
            if origin is not None and not self._rules.origin_allowed(origin.decode("latin-1"), host, scope["scheme"]):
                message = (
                    f"a {method} from a page of another origin ({origin.decode('latin-1')[:100]}) is refused; "
                    "to allow a page served elsewhere, list its origin in [server] cors_origins"
                )
                await reply_error(send, 403, "forbidden", message, path=scope["path"])
                return
            if _has_body(headers) and not _body_type_fits(headers.get(b"content-type", b""), scope["path"]):
                refusal = _media_message(headers, scope["path"])
                await reply_error(send, 415, "unsupported_media_type", refusal, path=scope["path"])
                return
        await self._app(scope, receive, send)

    async def _options(self, scope: Scope, send: Send) -> None:
        methods = sorted(set(self._methods_for(scope["path"])))
        if not methods:
            await reply_error(send, 404, "not_found", "Not Found")
            return
        allow = ", ".join([*methods, "OPTIONS"]).encode()
        await send({"type": "http.response.start", "status": 204, "headers": [(b"allow", allow)]})
        await send({"type": "http.response.body", "body": b""})


def _body_type_fits(content_type: bytes, path: str) -> bool:
    """JSON lines for the session import, JSON for every other body."""
    if path.endswith(IMPORT_PATH_END):
        return content_type.split(b";", 1)[0].strip().lower().decode("latin-1") in JSON_LINES_TYPES
    return is_json_type(content_type)


def _is_preflight(headers: dict[bytes, bytes]) -> bool:
    """A CORS preflight (the CORS middleware answers it): without ``Origin`` it is a plain ``OPTIONS``."""
    return b"origin" in headers and b"access-control-request-method" in headers


def _has_body(headers: dict[bytes, bytes]) -> bool:
    length = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (length is not None and length.strip() not in (b"0", b""))


def _media_message(headers: dict[bytes, bytes], path: str) -> str:
    given = headers.get(b"content-type", b"").decode("latin-1")[:100]
    said = f"Content-Type {given!r}" if given else "no Content-Type"
    if path.endswith(IMPORT_PATH_END):
        return f"the session file must be sent as JSON lines, but it came with {said}: send Content-Type: " + (
            "application/x-ndjson"
        )
    return f"the request body must be JSON, but it came with {said}: send Content-Type: application/json"
