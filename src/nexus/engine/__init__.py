"""The agent engine's building blocks: context assembly, failover, compaction, transcript repair.

``AssembledContext`` goes in, ``AgentResult`` comes out (seed 000). This package holds the
pieces the run loop is made of; each works on plain ``nexus.llm`` data and can be used
(and tested) on its own.
"""

from __future__ import annotations

from nexus.engine.bootstrap import BOOTSTRAP_FILES, BootstrapFile, load_bootstrap_files, scaffold_workspace
from nexus.engine.budget import (
    compute_budget,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tokens,
    should_compact,
)
from nexus.engine.compaction import (
    SUMMARY_PREFIX,
    CompactionError,
    CompactionOutcome,
    CompactionPlan,
    OverflowRecovery,
    compact,
    overflow_error,
    plan_compaction,
    serialize_transcript,
    summarize,
    summary_message,
    truncate_tool_results,
)
from nexus.engine.context import EventContext, PromptOptions, assemble_context, build_current_message
from nexus.engine.failover import ROTATE_KINDS, SHARED_COOLDOWNS, AuthProfile, ProfileCooldowns, failover_stream
from nexus.engine.repair import MISSING_RESULT_TEXT, repair_transcript, repair_transform, truncate_result
from nexus.engine.system_prompt import RuntimeInfo, SystemPromptSection, build_system_prompt
from nexus.engine.tool_policy import TOOL_GROUPS, filter_tools, is_tool_allowed
from nexus.engine.types import (
    AgentError,
    AgentErrorKind,
    AgentMessage,
    AgentResult,
    AgentRole,
    AgentToolCall,
    AssembledContext,
    CompactionEndEvent,
    CompactionResult,
    CompactionStartEvent,
    EngineEvent,
    EngineLimits,
    FallbackEvent,
    RetryEvent,
    StopReason,
    ThinkingConfig,
    TokenBudget,
    TokenUsage,
    WaitEvent,
    agent_error_from_message,
    new_id,
)

__all__ = [
    "BOOTSTRAP_FILES",
    "MISSING_RESULT_TEXT",
    "ROTATE_KINDS",
    "SHARED_COOLDOWNS",
    "SUMMARY_PREFIX",
    "TOOL_GROUPS",
    "AgentError",
    "AgentErrorKind",
    "AgentMessage",
    "AgentResult",
    "AgentRole",
    "AgentToolCall",
    "AssembledContext",
    "AuthProfile",
    "BootstrapFile",
    "CompactionEndEvent",
    "CompactionError",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionResult",
    "CompactionStartEvent",
    "EngineEvent",
    "EngineLimits",
    "EventContext",
    "FallbackEvent",
    "OverflowRecovery",
    "ProfileCooldowns",
    "PromptOptions",
    "RetryEvent",
    "RuntimeInfo",
    "StopReason",
    "SystemPromptSection",
    "ThinkingConfig",
    "TokenBudget",
    "TokenUsage",
    "WaitEvent",
    "agent_error_from_message",
    "assemble_context",
    "build_current_message",
    "build_system_prompt",
    "compact",
    "compute_budget",
    "estimate_context_tokens",
    "estimate_message_tokens",
    "estimate_tokens",
    "failover_stream",
    "filter_tools",
    "is_tool_allowed",
    "load_bootstrap_files",
    "new_id",
    "overflow_error",
    "plan_compaction",
    "repair_transcript",
    "repair_transform",
    "scaffold_workspace",
    "serialize_transcript",
    "should_compact",
    "summarize",
    "summary_message",
    "truncate_result",
    "truncate_tool_results",
]
