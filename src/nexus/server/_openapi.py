"""``/openapi.json`` that tells the truth: every status an operation answers, with the real bodies.

Routes declare their success body and their own error statuses with :func:`answers`; what the
middleware and the error handlers can answer on any operation is added here once: 401 (tokens
configured), 403 (a foreign Host or Origin), 500, 503 (the ledger cannot be written now), and for
operations with a body 413 (too large), 415 (not JSON) and 422. FastAPI's own 422 schema
(``{detail: [...]}``) is replaced by the API's ``{error: {type, message}}``, which is what a 422 is.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from nexus.server._schemas import ErrorBody

DESCRIPTIONS = {
    400: "invalid_request: well-formed, but it cannot be done (the message says why)",
    401: "unauthorized: a missing or wrong bearer token (only when [server] tokens are set)",
    403: "forbidden: a Host that is not a name of this server, or a state change from a page of another origin",
    404: "not_found: no such agent, session or turn",
    409: "conflict / no_broker / aborted / dropped: the name is taken, no broker runs in this server process, "
    "or a chat completion's turn was aborted or its message dropped",
    413: "too_large: the body is over [server] max_body_bytes (or the content limit)",
    415: "unsupported_media_type: a body that is not JSON",
    422: "invalid_request: malformed JSON, wrong types, unknown fields, values out of range",
    429: "queue_full: the agent's queue was full: its cap dropped the message (do not resend it blindly: "
    "x-should-retry is false), or, under drop policy new, refused it before it was queued (send it again later)",
    500: "internal_error: the server's fault, not the request's: a bug (details only in the server's log), or a "
    "database or [routing] setup that is not what the code expects (the message says what)",
    502: "upstream_error: the agent's turn failed (the model provider refused, no key...)",
    503: "unavailable: the ledger cannot be written now (full disk, held elsewhere), no stream slot, or the server "
    "is stopping; retry later",
}
ANY_OPERATION = (401, 403, 500, 503)
WITH_BODY = (413, 415, 422)
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def answers(
    ok: type[BaseModel] | None, *errors: int, status: int = 200, media: str | None = None
) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: its success body (``ok``; or ``media``, a non-JSON type) and its own errors."""
    responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ok} if ok is not None else {"description": "no content"}
    }
    if media is not None:
        responses[status] = {"content": {media: {"schema": {"type": "string"}}}}
    for code in errors:
        responses[code] = {"model": ErrorBody, "description": DESCRIPTIONS[code]}
    return responses


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``, ``/docs``) list what every operation can answer."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _complete(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


BEARER = {
    "type": "http",
    "scheme": "bearer",
    "description": "one of [server] tokens, or the token of this start (server.json; the web UI's #token=)",
}


def _complete(schema: dict[str, Any]) -> dict[str, Any]:
    # Tokens are optional (a loopback server without [server] tokens needs none): bearer, or nothing.
    # Declared, /docs shows an Authorize button that sends the token with every call it tries.
    schema.setdefault("components", {})["securitySchemes"] = {"bearer": BEARER}
    schema["security"] = [{"bearer": []}, {}]
    components = schema["components"].setdefault("schemas", {})
    body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(body.pop("$defs", {}))
    components["ErrorBody"] = body
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            statuses = {*ANY_OPERATION, *(WITH_BODY if "requestBody" in operation else ())}
            statuses |= {int(code) for code in responses if code.isdigit() and int(code) >= 400}
            for status in sorted(statuses):  # errors are JSON, whatever the route's own media type
                responses[str(status)] = {
                    "description": DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": _ERROR_REF}},
                }
    for fastapi_own in ("HTTPValidationError", "ValidationError"):
        components.pop(fastapi_own, None)
    return schema
