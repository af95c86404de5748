"""The agent engine: ``Runtime`` + ``AgentSpec`` → ``runtime.start(...)`` → ``Execution`` → ``AgentResult``.

The package is three folders, one per job (see docs/engine.md "Layout"):

- ``nexus.engine.assembly`` — building what the model is told (system prompt, bootstrap files,
  history window, token budget, compaction, transcript repair, tool policy);
- ``nexus.engine.execution`` — running it (the run loop, failover, events and callbacks, the
  turn journal and ledger mapping, the session lock);
- ``nexus.engine.wiring`` — connecting it to the rest of the system (``Runtime``, ``run_agent``,
  model resolution, the ``spawn_agent`` tool, compaction of a stored session);

with ``nexus.engine.types`` as their shared vocabulary. Imports run one way only:
assembly → types, execution → assembly, wiring → execution (tests/test_import_rules.py).

This module re-exports only what a user of the engine needs; everything else is imported from
its own module. Names load on first use, so ``import nexus.engine`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus._lazy import lazy_attribute

if TYPE_CHECKING:
    from nexus.agent import SteerReceipt
    from nexus.engine.assembly.context import EventContext, local_timezone, split_event_context
    from nexus.engine.execution.callbacks import EngineCallbacks, ToolState
    from nexus.engine.execution.events import (
        ExecutionEvent,
        ExecutionState,
        ReasoningDelta,
        ReplyDelta,
        RunEndEvent,
        RunStartEvent,
        StateEvent,
        SteerEvent,
        Subscription,
    )
    from nexus.engine.execution.execute import Execution
    from nexus.engine.execution.scope import RunScope
    from nexus.engine.types import (
        AgentError,
        AgentResult,
        AgentSpec,
        CompactionEndEvent,
        CompactionStartEvent,
        EngineEvent,
        EngineLimits,
        FallbackEvent,
        RetryEvent,
        RunStopReason,
        WaitEvent,
    )
    from nexus.engine.wiring.compact_session import SessionCompaction, compact_session
    from nexus.engine.wiring.gc_tuning import tune_gc_for_many_runs
    from nexus.engine.wiring.models import preflight, resolve_model, unreachable_model_problem
    from nexus.engine.wiring.run_agent import run_agent
    from nexus.engine.wiring.runtime import Runtime
    from nexus.engine.wiring.spawn import Spawner, create_worker_session

_PUBLIC: dict[str, str] = {
    # start and run agents
    "Runtime": ".wiring.runtime",
    "AgentSpec": ".types",
    "run_agent": ".wiring.run_agent",
    "EventContext": ".assembly.context",
    "split_event_context": ".assembly.context",
    "EngineLimits": ".types",
    "EngineEvent": ".types",
    "SessionCompaction": ".wiring.compact_session",
    "compact_session": ".wiring.compact_session",
    # what a run needs of its model, asked before an agent is registered or a command starts
    "resolve_model": ".wiring.models",
    "preflight": ".wiring.models",
    "unreachable_model_problem": ".wiring.models",
    # the running execution and its outcome
    "Execution": ".execution.execute",
    "ExecutionState": ".execution.events",
    "SteerReceipt": "nexus.agent.steering",
    "AgentResult": ".types",
    "AgentError": ".types",
    "RunStopReason": ".types",
    # the one event channel: the envelope and the engine's own event types
    "ExecutionEvent": ".execution.events",
    "RunStartEvent": ".execution.events",
    "StateEvent": ".execution.events",
    "ReplyDelta": ".execution.events",
    "ReasoningDelta": ".execution.events",
    "SteerEvent": ".execution.events",
    "Subscription": ".execution.events",
    "RunEndEvent": ".execution.events",
    "RetryEvent": ".types",
    "WaitEvent": ".types",
    "FallbackEvent": ".types",
    "CompactionStartEvent": ".types",
    "CompactionEndEvent": ".types",
    "EngineCallbacks": ".execution.callbacks",
    "ToolState": ".execution.callbacks",
    # sub-agents: a Spawner runs a spawn_agent call of the run a RunScope describes
    "Spawner": ".wiring.spawn",
    "RunScope": ".execution.scope",
    "create_worker_session": "nexus.engine.wiring.spawn",
    "local_timezone": "nexus.engine.assembly.context",
    "tune_gc_for_many_runs": "nexus.engine.wiring.gc_tuning",
}

__all__ = [
    "AgentError",
    "AgentResult",
    "AgentSpec",
    "CompactionEndEvent",
    "CompactionStartEvent",
    "EngineCallbacks",
    "EngineEvent",
    "EngineLimits",
    "EventContext",
    "Execution",
    "ExecutionEvent",
    "ExecutionState",
    "FallbackEvent",
    "ReasoningDelta",
    "ReplyDelta",
    "RetryEvent",
    "RunEndEvent",
    "RunScope",
    "RunStartEvent",
    "RunStopReason",
    "Runtime",
    "SessionCompaction",
    "Spawner",
    "StateEvent",
    "SteerEvent",
    "SteerReceipt",
    "Subscription",
    "ToolState",
    "WaitEvent",
    "compact_session",
    "create_worker_session",
    "local_timezone",
    "preflight",
    "resolve_model",
    "run_agent",
    "split_event_context",
    "tune_gc_for_many_runs",
    "unreachable_model_problem",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use (``import nexus.engine`` imports nothing heavy)."""
    return lazy_attribute(__name__, _PUBLIC, globals(), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
