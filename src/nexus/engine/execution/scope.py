"""What a tool running inside an engine run may know about that run: :class:`RunScope` and :data:`CURRENT_RUN`.

A leaf module so that the run (which sets the scope) and the ``spawn_agent`` tool (which reads
it, in ``nexus.engine.wiring``) share it without importing each other. The run hands its tools
the process it runs in as an opaque :class:`RunHost`; the wiring that started the run knows its
concrete type (the ``Runtime``), the run does not need to.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.engine.types import EngineLimits
    from nexus.ledger import Ledger
    from nexus.llm import AbortSignal, Model


class RunHost(Protocol):
    """The process services a run was started with (the ``Runtime``); tools reach the ledger through it."""

    @property
    def ledger(self) -> Ledger:
        """The ledger the run writes to."""
        ...


@dataclass(slots=True, frozen=True)
class RunScope:
    """What a tool running inside an engine run may know about that run."""

    session_label: str
    turn_id: str | None
    depth: int
    model: Model
    runtime: RunHost | None
    signal: AbortSignal
    limits: EngineLimits


CURRENT_RUN: ContextVar[RunScope | None] = ContextVar("nexus_engine_current_run", default=None)
"""The engine run the current task belongs to (``None`` outside a run)."""
