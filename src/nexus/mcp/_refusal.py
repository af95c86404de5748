"""A server's refusal to start, in the user's terms.

The SDK reports an HTTP server's 401 as "Server returned an error response" (the status is dropped),
and a program that is not an MCP server at all — ``cat``, which echoes the handshake back — as
"Method not found". :class:`HttpRefusal` keeps the status of the first request the server refused
(an httpx response hook on the connection's client) and :func:`start_refusal` says what either means.
"""

from __future__ import annotations

from typing import Any

_METHOD_NOT_FOUND = -32601
"""JSON-RPC's code for a method the peer does not know."""

_HTTP_HINTS = {
    401: 'its token is missing or wrong (the server\'s headers: Authorization = "Bearer ${TOKEN}")',
    403: "the token is not allowed to use it",
    404: "no MCP endpoint at this URL (check the path: many servers answer at /mcp)",
    405: "this URL does not take MCP's POST requests (an SSE server is added with --transport sse)",
}


class HttpRefusal:
    """The first error status an HTTP MCP server answered to a POST during one connection attempt."""

    __slots__ = ("reason", "status")

    def __init__(self) -> None:
        self.status: int | None = None
        self.reason = ""

    def clear(self) -> None:
        """Forget the last attempt's refusal (a new one starts)."""
        self.status, self.reason = None, ""

    async def hook(self, response: Any) -> None:
        """The httpx ``response`` event hook: a POST answered 4xx/5xx (the SDK keeps only a stand-in message)."""
        if self.status is None and response.status_code >= 400 and response.request.method == "POST":
            self.status, self.reason = response.status_code, response.reason_phrase or ""


def start_refusal(exc: BaseException, http: HttpRefusal, handshake_done: bool) -> str | None:
    """What a failed start means when the server answered it (an HTTP status, "Method not found"), or None."""
    if http.status is not None:
        status = f"HTTP {http.status} {http.reason}".rstrip()
        hint = _HTTP_HINTS.get(http.status)
        return f"the server answered {status}" + (f": {hint}" if hint else "")
    code = _error_code(exc)
    if code == _METHOD_NOT_FOUND and not handshake_done:
        return (
            "it did not answer MCP's handshake (initialize: 'Method not found'): is it an MCP server? A program "
            "that echoes what it reads, such as cat, answers so"
        )
    if code == _METHOD_NOT_FOUND:
        return "it answered the tool listing (tools/list) with 'Method not found': it offers no tools"
    return None


def _error_code(exc: BaseException) -> int | None:
    """The JSON-RPC error code of the SDK's ``MCPError`` in ``exc`` (inside exception groups), or None."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            code = _error_code(inner)
            if code is not None:
                return code
        return None
    from mcp.shared.exceptions import MCPError  # a start that got this far has the SDK

    return exc.code if isinstance(exc, MCPError) else None
