"""Token estimates by the chars/4 rule: one estimator for the whole broker.

The engine uses it to budget a prompt and decide when to compact; the providers use it to
fill in the usage of a response whose server reported none (llama.cpp's server sends no
usage even when asked), marking that usage ``estimated``. Cheap and provider-neutral,
and pessimistic enough for budgets; never a measurement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol

from nexus.llm.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1_200


def estimate_text_tokens(text: str) -> int:
    """Tokens of ``text`` by the chars/4 rule (rounded up; empty text is 0)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _block_chars(block: object) -> tuple[int, int]:
    """(characters, images) of one content block."""
    if isinstance(block, TextContent):
        return len(block.text), 0
    if isinstance(block, ThinkingContent):
        return len(block.thinking), 0
    if isinstance(block, ToolCall):
        return len(block.name) + len(block.raw_arguments or json.dumps(block.arguments, ensure_ascii=False)), 0
    if isinstance(block, ImageContent):
        return 0, 1
    return 0, 0


def estimate_message_tokens(message: Message) -> int:
    """Estimated tokens of one message (text, thinking, tool-call arguments, images)."""
    if isinstance(message, UserMessage) and isinstance(message.content, str):
        return estimate_text_tokens(message.content)
    if not isinstance(message, (UserMessage, AssistantMessage, ToolResultMessage)):
        return 0  # a custom agent message that never reaches the model
    blocks: Sequence[object] = message.content
    chars = images = 0
    for block in blocks:
        c, i = _block_chars(block)
        chars += c
        images += i
    return -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


class ToolDeclaration(Protocol):
    """What a tool declaration costs tokens for (``nexus.llm.Tool`` and the agent's tools both fit)."""

    @property
    def name(self) -> str:
        """The tool name."""
        ...

    @property
    def description(self) -> str:
        """What it does."""
        ...

    @property
    def parameters(self) -> Mapping[str, object]:
        """Its JSON schema."""
        ...


_SCHEMA_CHARS: dict[tuple[int, bool], tuple[object, int]] = {}
_SCHEMA_CACHE_MAX = 4096


def schema_chars(parameters: Mapping[str, object], *, ensure_ascii: bool = False) -> int:
    """Characters of a tool's JSON schema, measured once per schema object.

    Every model call estimates its tools: a workspace's coding tools serialized again on each
    turn were ~3 % of a broker turn's CPU (and the scripted model's own usage estimate 10 % of the
    end-to-end benchmark's). Tool schemas are built once and never changed in place, so the
    size is kept by the object's identity (the entry holds the object, so the id is not reused).
    """
    key = (id(parameters), ensure_ascii)
    known = _SCHEMA_CHARS.get(key)
    if known is not None and known[0] is parameters:
        return known[1]
    chars = len(json.dumps(parameters, ensure_ascii=ensure_ascii))
    if len(_SCHEMA_CHARS) >= _SCHEMA_CACHE_MAX:
        _SCHEMA_CHARS.clear()
    _SCHEMA_CHARS[key] = (parameters, chars)
    return chars


def estimate_tool_tokens(tools: Sequence[ToolDeclaration]) -> int:
    """Estimated tokens of tool declarations (name, description, JSON schema)."""
    chars = sum(len(t.name) + len(t.description) + schema_chars(t.parameters) for t in tools)
    return -(-chars // CHARS_PER_TOKEN)


def estimate_prompt_tokens(context: Context) -> int:
    """Estimated input tokens of a whole request: system prompt, messages and tools."""
    messages = sum(estimate_message_tokens(m) for m in context.messages)
    return estimate_text_tokens(context.system_prompt) + messages + estimate_tool_tokens(context.tools)


__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "estimate_message_tokens",
    "estimate_prompt_tokens",
    "estimate_text_tokens",
    "estimate_tool_tokens",
]
