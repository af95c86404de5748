"""The ``run_end`` of a run that failed before it announced one: every run ends with exactly one.

A run announces its own end once its turn is written (``EngineRun.finish``). It can fail before that: its
session's lock or its context (before the run is attached to its execution), or its turn's open (a ledger
error; ``LeaseLostError`` from the lease fence: the session was taken over meanwhile). The error still goes
to whoever awaits the run (the broker handles a lost lease itself), but listeners (the broker's deliverer, an
SSE client, ``nexus send --wait``) wait for an end event: without one a subscription never ended, and a steer
offered to the starting run was never handed back. ``Execution`` calls :func:`end_failed` (an attached run)
or publishes :func:`failed_start` when its task raised and no end was announced.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from nexus.engine.types import AgentError, AgentResult

if TYPE_CHECKING:
    from nexus.engine.execution._run import EngineRun

_CANCELLED = "the run's task was cancelled"


def failure_error(failure: BaseException, where: str) -> AgentError:
    """The error a ``run_end`` states for ``failure`` (``where``: what the run could not do)."""
    return AgentError("unknown", f"{where}: {type(failure).__name__}: {failure}")


def failed_start(failure: BaseException | None) -> AgentResult:
    """The result a run that failed before it was attached (its lock, its context) ends with: nothing ran."""
    if failure is None or isinstance(failure, asyncio.CancelledError):
        return AgentResult(stop_reason="aborted", error=AgentError("unknown", f"{_CANCELLED} before it started"))
    return AgentResult(stop_reason="error", error=failure_error(failure, "the run could not start"))


def end_failed(run: EngineRun, failure: BaseException) -> None:
    """``run`` raised ``failure`` before announcing its end: hand its steers back, announce the end with the error."""
    if isinstance(failure, asyncio.CancelledError):
        run.signal.abort(_CANCELLED)
    elif run.final_error is None:
        where = "the run's turn could not be opened" if run.turn_id is None else "the run's turn could not be written"
        run.final_error = failure_error(failure, where)
    run.close_steering()
    if run.owners is None:
        run.owners = []  # the result is only announced: no ledger read for its compactions' turn ids
    run.finish(run.build_result())
