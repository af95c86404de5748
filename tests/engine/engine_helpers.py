"""What engine tests share: running a context assembled (and changed) by hand with a runtime's services (the
engine core, no session lock), and waiting on the loop for something a run does in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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


async def until(condition: Callable[[], object], what: str) -> None:
    """Let the loop run until ``condition()`` holds (up to 10 s); an AssertionError naming ``what`` if it never does."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
