"""Make a stored conversation acceptable to the model it is about to be sent to.

Every provider runs :func:`prepare_messages` on ``context.messages`` before encoding:
conversations move between models (fallback, user switches) and carry debris (aborted
turns, tool calls whose results never came). The input list and its messages are never
mutated; changed messages are copies.

Rules:
- errored/aborted assistant messages are dropped (they are not a valid turn);
- thinking from another model becomes plain text (redacted thinking is dropped), signatures
  of other models are stripped; same-model thinking is kept unless empty and unsigned;
- tool-call ids are rewritten to what the target accepts and made unique in the conversation (two ids
  that normalise alike, or an id a server reuses every turn); results follow their call;
- a tool call without a result gets a synthetic error result "No result provided";
- a tool result without a matching call is dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace

from nexus._lazy import LazyPattern
from nexus.llm.types import (
    AssistantContent,
    AssistantMessage,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)

NO_RESULT_TEXT = "No result provided"

_ANTHROPIC_BAD = LazyPattern(r"[^A-Za-z0-9_-]")


def anthropic_tool_id(raw: str) -> str:
    """Anthropic accepts ``^[A-Za-z0-9_-]{1,64}$``."""
    clean = _ANTHROPIC_BAD.sub("_", raw) or "call"
    if len(clean) <= 64 and clean == raw:
        return clean
    return clean[:64] if len(clean) <= 64 else _shorten(clean, 64)


def openai_tool_id(raw: str) -> str:
    """OpenAI chat completions accepts ids of at most 40 characters."""
    return raw if 0 < len(raw) <= 40 else _shorten(raw or "call", 40)


def _shorten(text: str, limit: int) -> str:
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    return f"{text[: limit - 13]}_{digest}"


def same_model(message: AssistantMessage, model: Model) -> bool:
    """Was ``message`` produced by exactly this model (same provider, API and id)?"""
    return message.provider == model.provider and message.api == model.api and message.model == model.id


def prepare_messages(messages: list[Message], model: Model, normalise_id: Callable[[str], str]) -> list[Message]:
    """Return a copy of ``messages`` that ``model`` will accept (see the module doc)."""
    out: list[Message] = []
    id_map: dict[str, str] = {}
    taken: set[str] = set()  # ids already given to a call: providers reject duplicates (llama.cpp reuses call_0)
    open_calls: dict[str, ToolCall] = {}  # calls of the latest assistant turn still without a result
    for msg in messages:
        if isinstance(msg, AssistantMessage):
            if msg.stop_reason in ("error", "aborted"):
                continue
            _close_open_calls(out, open_calls)
            converted = _convert_assistant(msg, model, normalise_id, id_map, taken)
            if converted.content:
                out.append(converted)
                open_calls = {c.id: c for c in converted.content if isinstance(c, ToolCall)}
        elif isinstance(msg, ToolResultMessage):
            new_id = id_map.get(msg.tool_call_id)
            if new_id is None or new_id not in open_calls:
                continue  # orphaned result: its call was dropped or never existed
            del open_calls[new_id]
            out.append(msg if new_id == msg.tool_call_id else replace(msg, tool_call_id=new_id))
        else:
            _close_open_calls(out, open_calls)
            out.append(msg)
    _close_open_calls(out, open_calls)
    return out


def _close_open_calls(out: list[Message], open_calls: dict[str, ToolCall]) -> None:
    for call in open_calls.values():
        out.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(NO_RESULT_TEXT)],
                is_error=True,
            )
        )
    open_calls.clear()


def _convert_assistant(
    msg: AssistantMessage,
    model: Model,
    normalise_id: Callable[[str], str],
    id_map: dict[str, str],
    taken: set[str],
) -> AssistantMessage:
    same = same_model(msg, model)
    blocks: list[AssistantContent] = []
    changed = False
    for block in msg.content:
        if isinstance(block, ThinkingContent):
            kept = _convert_thinking(block, same)
            changed = changed or kept is not block
            if kept is not None:
                blocks.append(kept)
        elif isinstance(block, ToolCall):
            new_id = _unique_id(block.id, normalise_id, taken)
            id_map[block.id] = new_id
            sig = block.thought_signature if same else None
            if new_id != block.id or sig != block.thought_signature:
                block = replace(block, id=new_id, thought_signature=sig)
                changed = True
            blocks.append(block)
        elif isinstance(block, TextContent) and not same and block.signature is not None:
            blocks.append(TextContent(block.text))
            changed = True
        else:
            blocks.append(block)
    return replace(msg, content=blocks) if changed else msg


def _unique_id(raw: str, normalise_id: Callable[[str], str], taken: set[str]) -> str:
    """``raw`` normalised, with a numeric suffix when two calls would end up with the same id."""
    new_id = normalise_id(raw)
    n = 1
    while new_id in taken:
        new_id = normalise_id(f"{raw}_{n}")
        n += 1
    taken.add(new_id)
    return new_id


def _convert_thinking(block: ThinkingContent, same: bool) -> AssistantContent | None:
    if same:
        if block.redacted or block.signature is not None or block.thinking.strip():
            return block
        return None
    if block.redacted or not block.thinking.strip():
        return None
    return TextContent(block.thinking)
