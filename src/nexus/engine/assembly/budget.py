"""Token estimates and the per-layer :class:`TokenBudget`.

Estimates are chars/4 (images ~1,200 tokens; the estimator lives in :mod:`nexus.llm.tokens`,
shared with the providers): cheap, provider-neutral, and pessimistic enough for deciding when
to compact. When the provider has reported real usage,
:func:`estimate_context_tokens` starts from it and only estimates what came after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nexus.engine.types import TokenBudget, budget_reserves
from nexus.llm import CHARS_PER_TOKEN, AssistantMessage, Message, Model, estimate_tool_tokens
from nexus.llm import estimate_message_tokens as estimate_message_tokens
from nexus.llm import estimate_text_tokens as estimate_text_tokens

if TYPE_CHECKING:
    from nexus.agent import AgentTool


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
    return estimate_tool_tokens(tools)


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


HISTORY_WINDOWS = 2
"""How many context windows of history the engine loads (see :func:`history_window_chars`)."""


def history_window_chars(model: Model) -> int:
    """Characters of stored history a run of ``model`` loads: two context windows' worth (chars/4).

    Nothing older can matter to the run: the model is sent at most one window, and a compaction's
    summariser reads at most one window of transcript before the kept messages (it drops the oldest
    part of a longer one). Counting by stored body characters, which are at least the characters the
    estimator counts for text (JSON adds keys and escapes), the two windows hold at least a window of
    estimated tokens, so a history too long for the model is still too long loaded, and is compacted.
    Sessions the engine writes are compacted whenever their context fills, so their history after the
    latest compaction is about a window and this bound rarely cuts it; it bounds a never-compacted
    session (an import, a bigger model before) to what the window holds instead of its whole ancestry.
    """
    if model.context_window <= 0:  # an unknown window bounds nothing: the whole history, as before
        return UNBOUNDED_CHARS
    return HISTORY_WINDOWS * model.context_window * CHARS_PER_TOKEN


UNBOUNDED_CHARS = 1 << 62
"""A ``max_chars`` no history reaches."""
