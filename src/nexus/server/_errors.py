"""Every error the API returns has one shape: ``{"error": {"type": ..., "message": ...}}``.

Handlers map Nexus' own exceptions (unknown session, bad input, a finished queue item) and
FastAPI's validation errors to the right 4xx; anything unexpected is a 500 with a generic
message (the details go to the log, never to the client).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from nexus.errors import ConfigError, NexusError

if TYPE_CHECKING:
    from pydantic import ValidationError

log = logging.getLogger("nexus.server")


RETRY_AFTER_S = 30
"""What a 503 for a full disk or a database held elsewhere tells a client to wait before retrying."""


class ApiError(Exception):
    """An error the API reports as is: status code, a short type and a message for people.

    ``param`` and ``code`` (the OpenAI facade's refusals) name the request field at fault and why,
    as OpenAI's own errors do. ``headers`` go with the answer (``Retry-After``; ``x-should-retry:
    false`` where an automatic resend by the OpenAI SDK would run a message twice).
    """

    def __init__(
        self, status: int, error_type: str, message: str, *, param: str | None = None, code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message
        self.param, self.code, self.headers = param, code, headers


LABEL_SHOWN = 200
"""How much of an unknown label a 404 echoes: a 20,000-character path came back whole in the error (a trial)."""


def error_body(error_type: str, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The JSON body of every error response (``param`` and ``code`` both, one maybe null, when either is given)."""
    error: dict[str, Any] = {"type": error_type, "message": message}
    if param is not None or code is not None:
        error.update(param=param, code=code)
    return {"error": error}


def error_json(error_type: str, message: str, *, param: str | None = None, code: str | None = None) -> bytes:
    """:func:`error_body` as bytes, by the serializer the routes' answers use (compact, UTF-8): an error
    answered by a middleware reads byte for byte as one answered by a route."""
    return bytes(JSONResponse(error_body(error_type, message, param=param, code=code)).body)


_KINDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false", "list": "a list"}


def union_member(part: object) -> str | None:
    """The accepted form a union member tag of pydantic's error location names (``DeliverTo``, ``str``,
    ``list[ContentPart]``), else None."""
    if not isinstance(part, str):
        return None
    if part in _KINDS:
        return _KINDS[part]
    if part.startswith("list["):
        return "a list"
    return "an object" if part[:1].isupper() else None


def validation_message(exc: RequestValidationError | ValidationError) -> str:
    """One line naming each wrong field in the API's terms, never pydantic's internal names.

    A body that is not JSON says where it breaks; a field that accepts several forms (``deliver``:
    an object or ``NAME/ACCOUNT:TARGET``) names the forms when none fits, or the wrong field inside
    the form the client evidently meant.
    """
    problems: dict[str, str] = {}
    forms: dict[str, list[str]] = {}
    for error in exc.errors():
        loc = [part for part in error.get("loc", ()) if part != "body"]
        if error.get("type") == "json_invalid":
            at = f" at character {loc[0]}" if loc and isinstance(loc[0], int) else ""
            detail = (error.get("ctx") or {}).get("error")
            return f"the request body is not valid JSON{at}" + (f" ({detail})" if detail else "")
        tag = next((i for i, part in enumerate(loc) if union_member(part)), None)
        if tag is not None and tag == len(loc) - 1:  # the value is none of the field's forms
            field = ".".join(str(part) for part in loc[:tag]) or "body"
            forms.setdefault(field, []).append(union_member(loc[tag]) or "another form")
            continue
        if tag is not None:
            loc = loc[:tag] + loc[tag + 1 :]  # inside one form: name the field, not the form
        where = ".".join(str(part) for part in loc) or "body"
        problems.setdefault(where, str(error.get("msg", "invalid")))
    for field, kinds in forms.items():
        if not any(where.startswith(f"{field}.") for where in problems):
            problems.setdefault(field, "must be " + " or ".join(dict.fromkeys(kinds)))
    listed = [f"{where}: {message}" for where, message in list(problems.items())[:5]]
    return "; ".join(listed) or "the request is not valid"


def _unparsable_body(exc: StarletteHTTPException) -> str | None:
    """The 422 message for a JSON body the parser gave up on (FastAPI answers those 400), else None.

    ``json.loads`` raises ``JSONDecodeError`` (FastAPI's own 422) for most broken bodies, but other
    errors for three: bytes that are not UTF-8, nesting past the recursion limit, and an integer
    longer than Python converts (4300 digits). FastAPI wraps each in a 400 with the error as cause.
    """
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, UnicodeDecodeError):
        why = f"not UTF-8 text: byte {cause.start} is 0x{cause.object[cause.start]:02x}"
    elif isinstance(cause, RecursionError):
        why = "arrays or objects nested too deeply"
    elif isinstance(cause, ValueError) and "digits" in str(cause):
        why = "a number has more digits than the 4300 a JSON number may have here"
    else:
        return None
    return f"the request body is not valid JSON ({why})"


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the one shape."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        body = error_body(exc.error_type, exc.message, param=exc.param, code=exc.code)
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        unparsable = _unparsable_body(exc)
        if unparsable is not None:  # the same answer as any other body that is not JSON
            return JSONResponse(error_body("invalid_request", unparsable), status_code=422)
        kind = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 413: "too_large"}
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # the router names the first route it tried; list every method of the path
            methods = sorted(request.app.state.route_methods(request.url.path))
            headers["Allow"] = ", ".join([*methods, "OPTIONS"])
        return JSONResponse(
            error_body(kind.get(exc.status_code, "http_error"), str(exc.detail)),
            status_code=exc.status_code,
            headers=headers or None,
        )

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse(error_body("invalid_request", validation_message(exc)), status_code=422)

    async def nexus_error(request: Request, exc: Exception) -> JSONResponse:
        return await api_error(request, nexus_api_error(exc))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse(error_body("internal_error", "the server failed; see its log"), status_code=500)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(NexusError, nexus_error)
    app.add_exception_handler(Exception, unexpected)


def nexus_api_error(exc: Exception) -> ApiError:
    """The :class:`ApiError` a ``NexusError`` is answered as: the server's trouble (a full or busy database) is 503 with
    ``Retry-After``, a database that refused a statement 500, a missing thing 404, a conflict 409, a queue
    full under drop policy ``new`` 429 ``queue_full`` (as the other cap drops), anything else the client's 400."""
    from nexus.broker import BrokerError, QueueFullError, UnknownAgentError
    from nexus.ledger import (
        AgentRemovedError,
        LedgerBusyError,
        LedgerError,
        LedgerFullError,
        LedgerRefusedError,
        SessionExistsError,
        SessionNotFound,
        TurnNotFound,
        TurnStateError,
    )

    status, kind = 400, "invalid_request"
    if isinstance(exc, LedgerRefusedError):  # the database is not what the code expects: no request fixes that
        log.error("the ledger refused a statement: %s", exc)
        return ApiError(500, "internal_error", str(exc))
    if isinstance(exc, LedgerFullError | LedgerBusyError):  # the server's trouble: the client may retry
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        return ApiError(503, "unavailable", str(exc), headers=headers)
    if isinstance(exc, SessionNotFound):  # the library's hint names Python calls; say it in HTTP terms
        label = (
            exc.label if len(exc.label) <= LABEL_SHOWN else f"{exc.label[:LABEL_SHOWN]}… ({len(exc.label)} characters)"
        )
        message = f"no session or alias named {label!r}; GET /v1/sessions lists them"
        return ApiError(404, "not_found", message)
    if isinstance(exc, QueueFullError):  # not queued: a send once the queue has room is no duplicate
        again = "send it again later (the same id is fine: a refused message's id is not taken)"
        return ApiError(429, "queue_full", f"{exc}; {again}")
    if isinstance(exc, SessionNotFound | TurnNotFound | UnknownAgentError | AgentRemovedError):
        status, kind = 404, "not_found"
    elif isinstance(exc, SessionExistsError):
        status, kind = 409, "conflict"
    elif isinstance(exc, TurnStateError | BrokerError | ConfigError):
        status, kind = 409 if isinstance(exc, TurnStateError) else 400, "invalid_request"
    elif isinstance(exc, LedgerError):
        status, kind = 400, "invalid_request"
    return ApiError(status, kind, str(exc))
