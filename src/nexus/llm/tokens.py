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


def estimate_tool_tokens(tools: Sequence[ToolDeclaration]) -> int:
    """Estimated tokens of tool declarations (name, description, JSON schema)."""
    chars = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters, ensure_ascii=False)) for t in tools)
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
