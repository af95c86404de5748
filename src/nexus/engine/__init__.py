"""The agent engine: ``Runtime`` + ``AgentSpec`` → ``runtime.start(...)`` → ``Execution`` → ``AgentResult``.

The package is three folders, one per job (see docs/engine.md "Layout"):

- ``nexus.engine.assembly`` — building what the model is told (system prompt, bootstrap files,
  history window, token budget, compaction, transcript repair, tool policy);
- ``nexus.engine.execution`` — running it (the run loop, failover, events and callbacks, the
  turn journal and ledger mapping, the session lock);
- ``nexus.engine.wiring`` — connecting it to the rest of the system (``Runtime``, ``EngineEnv``,
  ``run_agent``, the ``spawn_agent`` tool, compaction of a stored session);

with ``nexus.engine.types`` as their shared vocabulary. Imports run one way only:
assembly → types, execution → assembly, wiring → execution (tests/engine/test_import_graph.py).

This module re-exports only what a user of the engine needs; everything else is imported from
its own module. Names load on first use, so ``import nexus.engine`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.agent.steering import SteerReceipt
    from nexus.engine.assembly.context import EventContext
    from nexus.engine.execution.callbacks import EngineCallbacks
    from nexus.engine.execution.events import (
        ExecutionEvent,
        ExecutionState,
        ReasoningDelta,
        ReplyDelta,
        RunEndEvent,
        RunStartEvent,
        StateEvent,
        SteerEvent,
    )
    from nexus.engine.execution.execute import Execution
    from nexus.engine.execution.scope import RunScope
    from nexus.engine.types import (
        AgentError,
        AgentResult,
        CompactionEndEvent,
        CompactionResult,
        CompactionStartEvent,
        EngineLimits,
        FallbackEvent,
        RetryEvent,
        RunStopReason,
        WaitEvent,
    )
    from nexus.engine.wiring.runner import run_agent
    from nexus.engine.wiring.runtime import AgentSpec, Runtime, SessionBusyError
    from nexus.engine.wiring.spawn import Spawner

_PUBLIC: dict[str, str] = {
    # start and run agents
    "Runtime": "nexus.engine.wiring.runtime",
    "AgentSpec": "nexus.engine.wiring.runtime",
    "run_agent": "nexus.engine.wiring.runner",
    "EventContext": "nexus.engine.assembly.context",
    "EngineLimits": "nexus.engine.types",
    # the running execution and its outcome
    "Execution": "nexus.engine.execution.execute",
    "ExecutionState": "nexus.engine.execution.events",
    "SteerReceipt": "nexus.agent.steering",
    "AgentResult": "nexus.engine.types",
    "AgentError": "nexus.engine.types",
    "RunStopReason": "nexus.engine.types",
    "CompactionResult": "nexus.engine.types",
    "SessionBusyError": "nexus.engine.wiring.runtime",
    # the one event channel: the envelope and the engine's own event types
    "ExecutionEvent": "nexus.engine.execution.events",
    "RunStartEvent": "nexus.engine.execution.events",
    "StateEvent": "nexus.engine.execution.events",
    "ReplyDelta": "nexus.engine.execution.events",
    "ReasoningDelta": "nexus.engine.execution.events",
    "SteerEvent": "nexus.engine.execution.events",
    "RunEndEvent": "nexus.engine.execution.events",
    "RetryEvent": "nexus.engine.types",
    "WaitEvent": "nexus.engine.types",
    "FallbackEvent": "nexus.engine.types",
    "CompactionStartEvent": "nexus.engine.types",
    "CompactionEndEvent": "nexus.engine.types",
    "EngineCallbacks": "nexus.engine.execution.callbacks",
    # sub-agents: a Spawner runs a spawn_agent call of the run a RunScope describes
    "Spawner": "nexus.engine.wiring.spawn",
    "RunScope": "nexus.engine.execution.scope",
}

__all__ = [
    "AgentError",
    "AgentResult",
    "AgentSpec",
    "CompactionEndEvent",
    "CompactionResult",
    "CompactionStartEvent",
    "EngineCallbacks",
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
    "SessionBusyError",
    "Spawner",
    "StateEvent",
    "SteerEvent",
    "SteerReceipt",
    "WaitEvent",
    "run_agent",
]


def __getattr__(name: str) -> object:
    """Load a public name on first use (``import nexus.engine`` imports nothing heavy)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'nexus.engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
