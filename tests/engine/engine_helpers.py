"""Running a context assembled (and changed) by hand with a runtime's services: the engine core, no session lock."""

from __future__ import annotations

from nexus.engine import Execution, Runtime
from nexus.engine.execution.callbacks import EngineCallbacks
from nexus.engine.execution.execute import execute
from nexus.engine.types import AssembledContext
from nexus.llm.types import Model


def start_context(
    runtime: Runtime, ctx: AssembledContext, model: Model, callbacks: EngineCallbacks | None = None
) -> Execution:
    """``execute(ctx)`` with ``runtime``'s ledger, provider call, limits, cooldowns and session cache."""
    return execute(
        ctx,
        callbacks,
        ledger=runtime.ledger,
        stream_fn=runtime.stream_fn,
        model=model,
        limits=runtime.limits,
        cooldowns=runtime.cooldowns,
        runtime=runtime,
        cache=runtime.sessions.get(ctx.session_label),
    )
