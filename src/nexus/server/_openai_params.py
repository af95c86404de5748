"""Which OpenAI chat-completion options the facade honours, ignores, or refuses.

An agent's turn is not a bare model call: its spec decides the model, tools and instructions, and
it answers with one reply. An option that would change what the client gets back (several
choices, JSON mode, log-probabilities, client-side tools, stop sequences...) cannot be honoured,
so it is refused — 400 naming it in ``param``, as OpenAI does — rather than silently dropped.
Sampling hints (``temperature``...) and bookkeeping fields (``metadata``...) change nothing a
client can check and are accepted and ignored (when of the type OpenAI takes); an option this list
does not know is refused. A field of the wrong type (``"stream": "yes"``) is 400 naming it too: the
facade's routes answer their body's faults as OpenAI does, not as the rest of the API (422).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from nexus.errors import NexusError
from nexus.server._errors import ApiError, nexus_api_error, union_member, validation_message

HANDLED = frozenset({"model", "messages", "stream", "stream_options", "user", "max_tokens", "max_completion_tokens"})
"""Options the facade acts on (``user`` picks the session; the max tokens bound the reply)."""
_HINT_TYPES: Mapping[str, tuple[tuple[type, ...], str]] = {
    **dict.fromkeys(("temperature", "top_p", "presence_penalty", "frequency_penalty"), ((int, float), "a number")),
    "seed": ((int,), "an integer"),
    **dict.fromkeys(("parallel_tool_calls", "store"), ((bool,), "true or false")),
    **dict.fromkeys(("metadata", "prediction"), ((dict,), "an object")),
    **dict.fromkeys(
        ("reasoning_effort", "verbosity", "service_tier", "prompt_cache_key", "safety_identifier"), ((str,), "a string")
    ),
}
"""Hints the agent's own model settings override, and bookkeeping: accepted, without effect, when of the type
each names (or ``null``): OpenAI refuses ``"temperature": "hot"``, and so does the facade."""


def _is(*accepted: object) -> Callable[[object], bool]:
    """Accepts exactly these values (``True`` is not ``1`` here)."""
    return lambda value: any(type(value) is type(ok) and value == ok for ok in accepted)


def _empty(value: object) -> bool:
    return value is None or value in ([], {}, "")


_DEFAULT_ONLY: Mapping[str, tuple[Callable[[object], bool], str]] = {
    "n": (_is(None, 1), "an agent gives one reply: n must be 1"),
    "response_format": (
        lambda value: value is None or (isinstance(value, dict) and value.get("type") == "text"),
        "an agent answers in text: only {'type': 'text'} is supported",
    ),
    "logprobs": (_is(None, False), "log-probabilities are not available through an agent"),
    "top_logprobs": (_is(None, 0), "log-probabilities are not available through an agent"),
    "tools": (_empty, "an agent uses its own tools (its spec); client-side tools are not supported"),
    "functions": (_empty, "an agent uses its own tools (its spec); client-side functions are not supported"),
    "tool_choice": (_is(None, "auto"), "an agent decides its own tool calls: only 'auto' is supported"),
    "function_call": (_is(None, "auto"), "an agent decides its own tool calls: only 'auto' is supported"),
    "stop": (_empty, "stop sequences are not supported: the agent's turn ends when it has answered"),
    "logit_bias": (_empty, "logit_bias is not supported through an agent"),
    "modalities": (lambda value: value is None or value == ["text"], "an agent answers in text only"),
    "audio": (_is(None), "an agent answers in text only"),
    "web_search_options": (_is(None), "an agent searches with its own tools, if its spec gives it any"),
}


def refuse_unsupported(options: Mapping[str, Any]) -> None:
    """400 with ``param`` for the first option in ``options`` (the request's fields) the facade cannot honour."""
    for name, value in options.items():
        if name in HANDLED:
            continue
        hint = _HINT_TYPES.get(name)
        if hint is not None:
            kinds, form = hint
            if value is not None and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))):
                raise ApiError(
                    400,
                    "invalid_request",
                    f"{name}: must be {form}, got {value!r:.100}",
                    param=name,
                    code="invalid_type",
                )
            continue
        check = _DEFAULT_ONLY.get(name)
        if check is None:
            raise ApiError(
                400, "invalid_request", f"unrecognized request argument {name!r}", param=name, code="unknown_parameter"
            )
        accepted, why = check
        if not accepted(value):
            raise ApiError(
                400, "invalid_request", f"{name}={value!r:.100} cannot be honoured: {why}", param=name,
                code="unsupported_value",
            )  # fmt: skip


_TYPE_ERRORS = frozenset({"string_type", "int_type", "bool_type", "list_type", "dict_type", "model_type", "float_type"})


def body_fault(exc: RequestValidationError) -> ApiError:
    """A body field of the wrong type or value as OpenAI answers it: 400 ``invalid_request`` with ``param``
    (``messages[0].content``) and ``code`` (``invalid_type``, ``missing_required_parameter``, ``invalid_value``)."""
    errors = list(exc.errors())
    inside = [e for e in errors if e.get("loc") and not union_member(e["loc"][-1])]  # within the form meant
    error = (inside or errors or [{}])[0]
    loc = list(error.get("loc", ()))
    if loc[:1] != ["body"] or error.get("type") == "json_invalid" or len(loc) < 2:
        return ApiError(422, "invalid_request", validation_message(exc))  # not a field: as the rest of the API
    param = ""
    for part in loc[1:]:
        if isinstance(part, int):
            param += f"[{part}]"
        elif union_member(part):  # pydantic's tag of the union member tried (``str``, ``list[ContentPart]``)
            continue
        else:
            param += f".{part}" if param else str(part)
    kind = error.get("type", "")
    code = (
        "missing_required_parameter"
        if kind == "missing"
        else "invalid_type"
        if kind in _TYPE_ERRORS
        else "invalid_value"
    )
    return ApiError(400, "invalid_request", validation_message(exc), param=param, code=code)


def with_code(error: ApiError) -> ApiError:
    """``error`` with a ``code``, as OpenAI's errors have one (its type when it names none: ``queue_full``,
    ``unavailable``…); the body then carries ``param`` too, null when no request field is at fault."""
    if error.code is None:
        error.code = error.error_type
    return error


class FacadeRoute(APIRoute):
    """A route of the OpenAI facade: a body FastAPI cannot validate is :func:`body_fault`'s 400, not a 422;
    every refusal (``ApiError``, and a ``NexusError`` as the rest of the API answers it) carries ``code``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise with_code(body_fault(exc)) from None
            except ApiError as exc:
                with_code(exc)
                raise
            except NexusError as exc:
                raise with_code(nexus_api_error(exc)) from exc

        return handle
