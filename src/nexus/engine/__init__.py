"""The agent engine's building blocks: context assembly, failover, compaction, transcript repair.

``AssembledContext`` goes in, ``AgentResult`` comes out (seed 000). This package holds the
pieces the run loop is made of; each works on plain ``nexus.llm`` data and can be used
(and tested) on its own.
"""

from __future__ import annotations

from nexus.engine.assembly.bootstrap import BOOTSTRAP_FILES, BootstrapFile, load_bootstrap_files, scaffold_workspace
from nexus.engine.assembly.budget import (
    compute_budget,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tokens,
    should_compact,
)
from nexus.engine.assembly.compaction import (
    CompactionError,
    CompactionOutcome,
    CompactionPlan,
    compact,
    overflow_error,
    plan_compaction,
    serialize_transcript,
    summarize,
    summary_message,
    truncate_tool_results,
)
from nexus.engine.assembly.context import (
    EventContext,
    PromptOptions,
    assemble_context,
    build_current_message,
    local_timezone,
)
from nexus.engine.assembly.repair import MISSING_RESULT_TEXT, repair_transcript, repair_transform, truncate_result
from nexus.engine.assembly.system_prompt import RuntimeInfo, SystemPromptSection, build_system_prompt
from nexus.engine.assembly.tool_policy import TOOL_GROUPS, filter_tools, is_tool_allowed
from nexus.engine.execution.failover import ROTATE_KINDS, SHARED_COOLDOWNS, ProfileCooldowns, failover_stream
from nexus.engine.types import (
    AgentError,
    AgentErrorKind,
    AgentResult,
    AgentRole,
    AssembledContext,
    CompactionEndEvent,
    CompactionResult,
    CompactionStartEvent,
    EngineEvent,
    EngineLimits,
    FallbackEvent,
    RetryEvent,
    RunStopReason,
    ThinkingConfig,
    TokenBudget,
    WaitEvent,
    agent_error_from_message,
    new_id,
)

# imported eagerly (it is light): the function must shadow its module's name on the package
from nexus.engine.wiring.compact_session import CompactionStatus, SessionCompaction, compact_session
from nexus.ledger.records import SUMMARY_PREFIX

__all__ = [
    "BOOTSTRAP_FILES",
    "MISSING_RESULT_TEXT",
    "ROTATE_KINDS",
    "SHARED_COOLDOWNS",
    "SUMMARY_PREFIX",
    "TOOL_GROUPS",
    "AgentError",
    "AgentErrorKind",
    "AgentResult",
    "AgentRole",
    "AssembledContext",
    "BootstrapFile",
    "CompactionEndEvent",
    "CompactionError",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionResult",
    "CompactionStartEvent",
    "CompactionStatus",
    "EngineEvent",
    "EngineLimits",
    "EventContext",
    "FallbackEvent",
    "ProfileCooldowns",
    "PromptOptions",
    "RetryEvent",
    "RunStopReason",
    "RuntimeInfo",
    "SessionCompaction",
    "SystemPromptSection",
    "ThinkingConfig",
    "TokenBudget",
    "WaitEvent",
    "agent_error_from_message",
    "assemble_context",
    "build_current_message",
    "build_system_prompt",
    "compact",
    "compact_session",
    "compute_budget",
    "estimate_context_tokens",
    "estimate_message_tokens",
    "estimate_tokens",
    "failover_stream",
    "filter_tools",
    "is_tool_allowed",
    "load_bootstrap_files",
    "local_timezone",
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

# --------------------------------------------------------------------------- execution core
# execute / run_agent / spawn_agent pull in the agent loop, so they load on first use:
# ``import nexus.engine`` stays cheap for code that only needs the building blocks.

_EXECUTION_NAMES: dict[str, str] = {
    "AgentPhase": "nexus.engine.execution.callbacks",
    "EngineCallbacks": "nexus.engine.execution.callbacks",
    "ToolStatus": "nexus.engine.execution.callbacks",
    "EngineExecution": "nexus.engine.execution.execute",
    "Execution": "nexus.engine.execution.execute",
    "Runtime": "nexus.engine.wiring.runtime",
    "AgentSpec": "nexus.engine.wiring.runtime",
    "Spawner": "nexus.engine.wiring.spawn",
    "EngineSpawner": "nexus.engine.wiring.spawn",
    "SessionBusyError": "nexus.engine.wiring.runtime",
    "ExecutionEvent": "nexus.engine.execution.events",
    "ExecutionState": "nexus.engine.execution.events",
    "Subscription": "nexus.engine.execution.events",
    "RunStartEvent": "nexus.engine.execution.events",
    "RunEndEvent": "nexus.engine.execution.events",
    "StateEvent": "nexus.engine.execution.events",
    "ReplyDelta": "nexus.engine.execution.events",
    "ReasoningDelta": "nexus.engine.execution.events",
    "SteerEvent": "nexus.engine.execution.events",
    "SteerReceipt": "nexus.agent.steering",
    "SteerMode": "nexus.agent.steering",
    "EngineStreamEvent": "nexus.engine.execution.execute",
    "execute": "nexus.engine.execution.execute",
    "EngineEnv": "nexus.engine.wiring.runner",
    "limits_from_config": "nexus.engine.wiring.runner",
    "resolve_model": "nexus.engine.wiring.runner",
    "run_agent": "nexus.engine.wiring.runner",
    "session_lock": "nexus.engine.execution.session_lock",
    "SPAWN_TOOL_NAME": "nexus.engine.wiring.spawn",
    "spawn_agent_tool": "nexus.engine.wiring.spawn",
}

__all__ += list(_EXECUTION_NAMES)


def __getattr__(name: str) -> object:
    """Load the execution-core names on first use."""
    module = _EXECUTION_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'nexus.engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
