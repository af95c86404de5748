"""Engine data types: defaults from the seeds, usage accounting, error mapping, limits validation."""

from __future__ import annotations

import pytest

from nexus.engine import AgentError, AgentResult, EngineLimits
from nexus.engine.types import AssembledContext, TokenBudget, agent_error_from_message, new_id
from nexus.errors import ConfigError
from nexus.ledger import CompactionRecord, StoredMessage
from nexus.llm.types import (
    AssistantMessage,
    Cost,
    ErrorKind,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    Usage,
    UserMessage,
    add_call_usage,
)


def test_limits_defaults_match_the_seed() -> None:
    limits = EngineLimits()
    assert (limits.max_iterations, limits.max_retries, limits.max_tool_result_chars) == (25, 3, 60_000)
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


def test_run_usage_sums_io_and_cost_but_not_cache() -> None:
    usage = Usage()
    add_call_usage(
        usage, Usage(input=100, output=20, cache_read=5_000, cache_write=300, reasoning=7, cost=Cost(total=0.5))
    )
    add_call_usage(
        usage, Usage(input=50, output=10, cache_read=5_400, cache_write=0, reasoning=3, cost=Cost(total=0.25))
    )
    assert (usage.input, usage.output, usage.reasoning) == (150, 30, 10)
    assert (usage.cache_read, usage.cache_write) == (5_400, 0)
    assert usage.total == 150 + 30 + 5_400
    assert usage.cost.total == 0.75


def test_run_usage_is_estimated_when_any_call_was() -> None:
    usage = Usage()
    add_call_usage(usage, Usage(input=100, output=20))
    assert not usage.estimated
    add_call_usage(usage, Usage(input=40, output=3, estimated=True))
    add_call_usage(usage, Usage(input=50, output=10))
    assert usage.estimated and usage.total == 223


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


def test_result_messages_are_the_ledgers_stored_messages_with_reply_text() -> None:
    # one message type per role: AgentResult carries the ledger's StoredMessage rows (no engine twin)
    assistant = AssistantMessage(content=[ThinkingContent("hmm"), TextContent("hi")], timestamp=5)
    tool = ToolResultMessage("c1", "read", [TextContent("data")])
    user = UserMessage([TextContent("look"), ImageContent("AA", "image/png")])
    last = AssistantMessage(content=[])  # e.g. an aborted call that streamed nothing
    rows = [StoredMessage(i, "t", i, m.role, m) for i, m in enumerate([user, assistant, tool, last])]
    result = AgentResult(messages=rows)
    assert [m.text for m in rows] == ["look", "hi", "data", ""]
    assert result.reply == "hi"  # the last assistant text, not the empty last message
    assert AgentResult().reply == ""


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
    assert result.compactions == [] and result.returned_steers == [] and result.turn_id is None
    assert CompactionRecord(summary="s", summarized_through_turn_id="").trigger == "context_limit"
