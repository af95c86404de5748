"""A run's task, from its admission to the loop to its end: the session's lock (and the turns it recovered), the
context, the run. :meth:`Runtime.start <nexus.engine.wiring.runtime.Runtime.start>` hands it to the execution."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.engine.execution.session_lock import run_lock
from nexus.engine.wiring._start import StartRequest, aborted_before_start, admitted, answered_before_start
from nexus.ledger import TurnNotSavedError

if TYPE_CHECKING:
    from nexus.engine.execution.execute import Execution
    from nexus.engine.types import AgentResult, AgentSpec
    from nexus.engine.wiring.runtime import Runtime
    from nexus.llm import Model


class _LockHooks:
    """What a run's session lock tells it: a wait, turns it recovered (slotted: no closures and cells per run)."""

    __slots__ = ("execution", "rescued", "runtime", "turns")

    def __init__(self, runtime: Runtime, execution: Execution, rescued: tuple[str, ...]) -> None:
        self.runtime, self.execution, self.rescued, self.turns = runtime, execution, rescued, rescued[:0]

    def waiting(self) -> None:
        from nexus.engine.execution.events import LockWaitEvent

        self.execution._publish(LockWaitEvent())

    def recovered(self, turn_ids: list[str]) -> None:
        from nexus.engine.execution.events import RecoveredEvent

        mine = tuple(turn_id for turn_id in turn_ids if turn_id in self.rescued)
        self.runtime.unsaved[:] = [turn_id for turn_id in self.runtime.unsaved if turn_id not in mine]
        self.turns = tuple(turn_ids)  # the run may find its messages answered by one of them
        self.execution._publish(RecoveredEvent(self.turns, mine))


async def begin(
    runtime: Runtime, execution: Execution, spec: AgentSpec, model: Model, request: StartRequest
) -> AgentResult:
    """The execution's task: the session's lock, the context, the run (see :meth:`Runtime.start`)."""
    hooks = _LockHooks(runtime, execution, tuple(runtime.unsaved))
    try:
        await admitted()  # a burst of starts goes on a few per round of the loop
        async with run_lock(
            runtime.ledger, execution.session_label, signal=execution.signal,
            on_wait=hooks.waiting, on_recovered=hooks.recovered, orphans=hooks.rescued,
        ) as held:  # fmt: skip
            if not held:
                return aborted_before_start(request.message)
            if hooks.turns and request.consumes and (answered := await answered_before_start(runtime.ledger, request)):
                return answered  # a recovered (rescued) turn consumed the run's queue items: not run again
            await runtime.prepare_tools(execution.session_label, spec.role, spec.tools, execution.signal)
            runtime.run_of(execution, await runtime.context_for(execution, spec, model, request), spec, model)
            run = execution._run
            assert run is not None
            try:
                return await run.main()
            except TurnNotSavedError:  # the next run of the session puts it in the ledger first (from its rescue file)
                if run.turn_id is not None:
                    runtime.unsaved.append(run.turn_id)
                raise
    finally:  # a finished run leaves the live table now: 1,000 ended runs kept their results until the next start
        runtime._live.pop(execution.run_id, None)
