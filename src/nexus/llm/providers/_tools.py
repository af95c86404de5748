"""Turning streamed tool-call argument text into a parsed ``ToolCall``."""

from __future__ import annotations

import json

from nexus.llm.types import ToolCall


def finish_tool_call(call: ToolCall, raw: str) -> None:
    """Parse ``raw`` into ``call.arguments``; keep the text in ``raw_arguments`` when it is not a JSON object.

    An empty string means "no arguments" (``{}``). Invalid JSON is not an error here:
    the tool layer reports it to the model, which can then retry with valid arguments.
    """
    text = raw.strip()
    if not text:
        call.arguments = {}
        call.raw_arguments = None
        return
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        call.arguments = parsed
        call.raw_arguments = None
    else:
        call.arguments = {}
        call.raw_arguments = raw


def mark_incomplete(call: ToolCall, raw: str) -> None:
    """A call whose arguments never finished (the response ended or restarted inside it).

    Even text that parses is not trusted: the provider never said the arguments were
    complete. ``arguments`` stays ``{}`` and ``raw_arguments`` holds what arrived (possibly
    ``""``), so the tool layer refuses to run it instead of running it with ``{}``.
    """
    call.arguments = {}
    call.raw_arguments = raw
