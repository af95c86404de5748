"""CORS for the origins in ``[server] cors_origins``: Starlette's middleware, with the API's answers to a preflight.

Starlette answers a preflight it allows ``200`` with the text ``OK``, and one it refuses ``400`` with the text
``Disallowed CORS origin``. Here an allowed preflight is ``204`` with no body (as ``OPTIONS`` on any path), and a
refused one is ``403 forbidden`` in the API's error shape (as the request itself would be), saying what to change.
The ``Access-Control-*`` headers are Starlette's, unchanged.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from nexus.server._errors import error_json

_BODY_HEADERS = frozenset({"content-length", "content-type"})


class ApiCors(CORSMiddleware):
    """``CORSMiddleware`` whose preflight answers are 204 (allowed) or the API's 403 error (refused)."""

    def preflight_response(self, request_headers: Headers) -> Response:
        """Starlette's decision and headers; the API's status and body."""
        decided = super().preflight_response(request_headers)
        headers = {name: value for name, value in decided.headers.items() if name not in _BODY_HEADERS}
        if decided.status_code < 400:
            return Response(status_code=204, headers=headers)
        body = error_json("forbidden", self._refusal(request_headers))
        return Response(body, status_code=403, headers=headers, media_type="application/json")

    def _refusal(self, request_headers: Headers) -> str:
        """Why the preflight is refused, in terms of the setting or the request to change."""
        origin = request_headers["origin"][:100]
        if not self.is_allowed_origin(origin=request_headers["origin"]):
            return (
                f"a page of origin {origin!r} may not call this API (CORS preflight refused); "
                "to allow it, list its origin in [server] cors_origins"
            )
        method = request_headers["access-control-request-method"][:20]
        if method not in self.allow_methods:
            allowed = ", ".join(sorted(self.allow_methods))
            return f"method {method!r} is not allowed from another origin (CORS preflight refused); allowed: {allowed}"
        asked = request_headers.get("access-control-request-headers", "")
        refused = [h.strip() for h in asked.lower().split(",") if h.strip() and h.strip() not in self.allow_headers]
        if refused:
            allowed = ", ".join(sorted({h.lower() for h in self.allow_headers}))
            return (
                f"request header(s) {', '.join(refused)[:200]} not allowed from another origin "
                f"(CORS preflight refused); allowed: {allowed}"
            )
        return "the CORS preflight is refused (private network access is not allowed)"
