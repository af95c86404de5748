"""Chunking and token estimates shared by the scripted model and the fake server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nexus.llm import Context, Cost, Message, Model, Usage, apply_cost, message_to_dict, schema_chars
from nexus.testing.steps import Cut, Malformed, Reply, ScriptError, Stall, Step, StreamError, TextPart, ThinkingPart

DEFAULT_CHUNK_CHARS = 16
"""About four tokens of four characters: small enough that every test sees several deltas."""


def pieces(content: str, size: int) -> list[str]:
    """``content`` split into ``size``-character pieces (none for an empty string)."""
    size = max(1, size)
    return [content[i : i + size] for i in range(0, len(content), size)]


def estimate_tokens(chars: int) -> int:
    """The usual chars/4 estimate, rounded up, never below 1 for non-empty input."""
    return (chars + 3) // 4


def arguments_json(arguments: Mapping[str, Any]) -> str:
    """Tool arguments the way providers stream them: compact JSON text."""
    return json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False)


def reply_chars(reply: Reply) -> int:
    """Characters of model output in ``reply`` (text, thinking, tool names and arguments)."""
    total = 0
    for part in reply.parts:
        if isinstance(part, TextPart):
            total += len(part.text)
        elif isinstance(part, ThinkingPart):
            total += len(part.thinking)
        else:
            total += len(part.name) + len(arguments_json(part.arguments))
    return total


_MESSAGE_CHARS: dict[int, int] = {}
_MEASURED: list[Message] = []
"""The messages ``_MESSAGE_CHARS`` has sizes of, kept alive so that no other object can take one's id."""
_MESSAGE_CACHE_MAX = 4096


def message_chars(message: Message) -> int:
    """Characters of one message's JSON, measured once per message object.

    A session's history reaches the model call after call as the same objects (the ledger's window
    cache hands them out again), and serializing all of it on every call was ~4 % of the end-to-end
    broker benchmark's CPU, spent in this fake model, not in the engine it measures. Messages are
    not changed in place once sent, so the size is kept by identity, as ``schema_chars`` does. The
    object is kept in a list beside the sizes, not in a pair per entry: a pair cost ~70 bytes a message
    of every run in flight (a thousand runs at once in the concurrency benchmark).
    """
    chars = _MESSAGE_CHARS.get(id(message))
    if chars is not None:  # the id is still this object's: every object measured is kept alive in _MEASURED
        return chars
    chars = len(json.dumps(message_to_dict(message), ensure_ascii=False))
    if len(_MESSAGE_CHARS) >= _MESSAGE_CACHE_MAX:
        _MESSAGE_CHARS.clear()
        _MEASURED.clear()
    _MESSAGE_CHARS[id(message)] = chars
    _MEASURED.append(message)
    return chars


def context_chars(context: Context) -> int:
    """Characters of everything sent to the model (system prompt, messages, tool schemas)."""
    total = len(context.system_prompt)
    for message in context.messages:
        total += message_chars(message)
    for tool in context.tools:
        total += len(tool.name) + len(tool.description) + schema_chars(tool.parameters, ensure_ascii=True)
    return total


def priced(usage: Usage, model: Model) -> Usage:
    """``usage`` with ``total`` and ``cost`` filled from the model's $/Mtok prices.

    The cost object is replaced, not updated, so a ``Cost`` shared with a scripted step stays as written.
    """
    usage.cost = Cost()
    apply_cost(model, usage)
    return usage


def streamed_reply(step: Step) -> Reply:
    """The response a streaming step plays (itself, or the reply a stall/cut/error wraps)."""
    if isinstance(step, Reply):
        return step
    if isinstance(step, Stall):
        return step.then
    if isinstance(step, Cut | Malformed | StreamError):
        return step.of
    raise ScriptError(f"cannot stream step {type(step).__name__}")
