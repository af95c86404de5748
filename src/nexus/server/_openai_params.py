"""Which OpenAI chat-completion options the facade honours, ignores, or refuses.

An agent's turn is not a bare model call: its spec decides the model, tools and instructions, and
it answers with one reply. An option that would change what the client gets back (several
choices, JSON mode, log-probabilities, client-side tools, stop sequences...) cannot be honoured,
so it is refused — 400 naming it in ``param``, as OpenAI does — rather than silently dropped.
Sampling hints (``temperature``...) and bookkeeping fields (``metadata``...) change nothing a
client can check and are accepted and ignored; an option this list does not know is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nexus.server._errors import ApiError

HANDLED = frozenset({"model", "messages", "stream", "stream_options", "user", "max_tokens", "max_completion_tokens"})
"""Options the facade acts on (``user`` picks the session; the max tokens bound the reply)."""
IGNORED = frozenset(
    {
        "temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "reasoning_effort", "verbosity",
        "parallel_tool_calls", "store", "metadata", "service_tier", "prediction", "prompt_cache_key",
        "safety_identifier",
    }
)  # fmt: skip
"""Hints the agent's own model settings override, and bookkeeping: accepted, without effect."""


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
        if name in HANDLED or name in IGNORED:
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
