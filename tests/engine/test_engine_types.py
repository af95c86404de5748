"""Engine data types: defaults from the seeds, usage accounting, error mapping, limits validation."""

from __future__ import annotations

import pytest

from nexus.engine import (
    AgentError,
    AgentMessage,
    AgentResult,
    AgentToolCall,
    AssembledContext,
    CompactionResult,
    EngineLimits,
    TokenBudget,
    TokenUsage,
    agent_error_from_message,
    new_id,
)
from nexus.errors import ConfigError
from nexus.llm.types import (
    AssistantMessage,
    ErrorKind,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)


def test_limits_defaults_match_the_seed() -> None:
    limits = EngineLimits()
    assert (limits.max_iterations, limits.max_retries, limits.max_tool_result_chars) == (25, 3, 50_000)
    assert (limits.reserve_tokens, limits.keep_recent_tokens, limits.subagent_max_depth) == (16_384, 20_000, 3)


@pytest.mark.parametrize("field", ["max_iterations", "max_tool_result_chars", "timeout_ms", "keep_recent_tokens"])
def test_limits_reject_non_positive_values(field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        EngineLimits(**{field: 0})


def test_limits_reject_negative_retries_and_bad_cooldowns() -> None:
    with pytest.raises(ConfigError, match="max_retries"):
        EngineLimits(max_retries=-1)
    with pytest.raises(ConfigError, match="cooldown"):
        EngineLimits(cooldown_initial_s=10, cooldown_max_s=5)


def test_token_usage_sums_io_but_not_cache() -> None:
    usage = TokenUsage()
    usage.add(Usage(input=100, output=20, cache_read=5_000, cache_write=300, reasoning=7))
    usage.add(Usage(input=50, output=10, cache_read=5_400, cache_write=0, reasoning=3))
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (150, 30, 10)
    assert (usage.cached_input_tokens, usage.cache_write_tokens) == (5_400, 0)
    assert usage.total_tokens == 150 + 30 + 5_400
    assert TokenUsage.from_usage(Usage(input=1, output=2)).total_tokens == 3


def test_token_usage_is_estimated_when_any_call_was() -> None:
    usage = TokenUsage()
    usage.add(Usage(input=100, output=20))
    assert not usage.estimated
    usage.add(Usage(input=40, output=3, estimated=True))
    usage.add(Usage(input=50, output=10))
    assert usage.estimated and usage.total_tokens == 223


def test_budget_properties_and_for_model() -> None:
    budget = TokenBudget(
        context_window=10_000, reserve_output=2_000, reserve_compaction=1_000, system=500, history=5_500
    )
    assert budget.used == 6_000 and budget.available == 7_000 and budget.remaining == 1_000 and budget.fits
    small = budget.for_model(Model("s", "p", "a", context_window=8_000, max_tokens=4_000))
    assert small.context_window == 8_000 and small.reserve_output == 2_000 and small.reserve_compaction == 2_000
    assert small.used == 6_000 and small.remaining < 0 and small.fits
    tiny = budget.for_model(Model("t", "p", "a", context_window=4_000))
    assert not tiny.fits


@pytest.mark.parametrize(
    ("kind", "expected", "retryable"),
    [
        ("auth", "auth_failure", False),
        ("auth_permanent", "auth_failure", False),
        ("billing", "auth_failure", False),
        ("rate_limit", "rate_limit", True),
        ("overloaded", "overloaded", True),
        ("timeout", "timeout", True),
        ("network", "network", True),
        ("context_overflow", "context_overflow", False),
        ("format", "model_error", False),
        ("unknown", "model_error", False),
    ],
)
def test_agent_error_from_provider_error(kind: ErrorKind, expected: str, retryable: bool) -> None:
    message = AssistantMessage(stop_reason="error", error_kind=kind, error_message=f"boom {kind}")
    error = agent_error_from_message(message)
    assert error == AgentError(expected, f"boom {kind}", retryable)  # type: ignore[arg-type]


def test_agent_message_from_llm_messages() -> None:
    assistant = AssistantMessage(content=[ThinkingContent("hmm"), TextContent("hi")], timestamp=5)
    wrapped = AgentMessage.from_message(assistant, 2)
    assert (wrapped.role, wrapped.content, wrapped.thinking, wrapped.sequence, wrapped.created_at) == (
        "assistant",
        "hi",
        "hmm",
        2,
        5,
    )
    assert wrapped.message is assistant and len(wrapped.id) == 26
    tool = AgentMessage.from_message(ToolResultMessage("c1", "read", [TextContent("data")]), 3, id="fixed")
    assert (tool.role, tool.tool_call_id, tool.content, tool.id) == ("tool", "c1", "data", "fixed")
    user = AgentMessage.from_message(UserMessage([TextContent("look"), ImageContent("AA", "image/png")]), 0)
    assert (user.role, user.content) == ("user", "look")


def test_ids_are_unique_and_sortable() -> None:
    ids = [new_id() for _ in range(50)]
    assert len(set(ids)) == 50 and ids == sorted(ids)


def test_result_and_context_defaults() -> None:
    result = AgentResult()
    assert result.stop_reason == "end_turn" and result.error is None and result.compaction is None
    ctx = AssembledContext(
        system_prompt="s",
        history=[],
        current_message=UserMessage("hi"),
        model="m",
        provider="p",
        token_budget=TokenBudget(context_window=1_000),
        run_id="r",
        session_label="main",
    )
    assert ctx.role == "unified" and ctx.tools == [] and ctx.timeout_ms == 600_000 and ctx.parent_turn_id is None
    call = AgentToolCall(id="c", tool_name="read", params={})
    assert call.status == "pending" and call.started_at > 0
    assert CompactionResult(summary="s").trigger == "context_limit"
