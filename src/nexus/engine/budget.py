"""Token estimates and the per-layer :class:`TokenBudget`.

Estimates are chars/4 (images ~1,200 tokens): cheap, provider-neutral, and pessimistic
enough for deciding when to compact. When the provider has reported real usage,
:func:`estimate_context_tokens` starts from it and only estimates what came after.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nexus.engine.types import TokenBudget, budget_reserves
from nexus.llm.types import (
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from nexus.agent.tool_types import AgentTool

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


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Estimated tokens of a message list (the sum of :func:`estimate_message_tokens`)."""
    return sum(estimate_message_tokens(m) for m in messages)


def estimate_context_tokens(messages: Sequence[Message]) -> int:
    """Tokens the conversation occupies: the last reported usage plus estimates for newer messages.

    The last successful assistant message's usage (input + output + cache) is what the
    provider really counted; only messages after it are estimated. Without usage, all are estimated.
    """
    return context_estimates(messages)[0]


def context_estimates(messages: Sequence[Message]) -> tuple[int, list[int | None]]:
    """:func:`estimate_context_tokens` and the per-message estimates it made (``None`` where usage covered).

    The run reuses the per-message numbers, so a history is estimated once per turn, not twice.
    """
    estimates: list[int | None] = [None] * len(messages)
    total = start = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.stop_reason not in ("error", "aborted"):
            u = message.usage
            reported = u.input + u.output + u.cache_read + u.cache_write
            if reported > 0:
                total, start = reported, index + 1
                break
    for index in range(start, len(messages)):
        value = estimates[index] = estimate_message_tokens(messages[index])
        total += value
    return total, estimates


def reported_usage(message: object) -> int:
    """The context size a successful assistant message's usage reports (input + output + cache); else 0."""
    if isinstance(message, AssistantMessage) and message.stop_reason not in ("error", "aborted"):
        u = message.usage
        return u.input + u.output + u.cache_read + u.cache_write
    return 0


def estimate_tools_tokens(tools: Sequence[AgentTool]) -> int:
    """Estimated tokens of the tool declarations (name, description, JSON schema)."""
    chars = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters, ensure_ascii=False)) for t in tools)
    return -(-chars // CHARS_PER_TOKEN)


def compute_budget(
    model: Model,
    *,
    system_prompt: str = "",
    history: Sequence[Message] = (),
    current: Message | None = None,
    tools: Sequence[AgentTool] = (),
    max_response_tokens: int | None = None,
    reserve_tokens: int = 16_384,
) -> TokenBudget:
    """The budget of one call to ``model``: per-layer usage and both reserves.

    The reply reserve is ``max_response_tokens`` (else the model's max output) and the
    compaction reserve is ``reserve_tokens``; each is capped at a quarter of the window.
    """
    output, compaction = budget_reserves(model.context_window, max_response_tokens or model.max_tokens, reserve_tokens)
    return TokenBudget(
        context_window=model.context_window,
        reserve_output=output,
        reserve_compaction=compaction,
        system=estimate_text_tokens(system_prompt),
        history=estimate_context_tokens(history),
        current=estimate_message_tokens(current) if current is not None else 0,
        tools=estimate_tools_tokens(tools),
    )


def should_compact(budget: TokenBudget) -> bool:
    """Proactive trigger: compact before calling when the prompt eats into the reserves."""
    return budget.remaining < 0
