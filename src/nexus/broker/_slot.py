"""One registered agent's live state inside the broker: its queue, its run, its waiters."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from nexus.broker.modes import QueueOverrides
from nexus.broker.runner import RunHandle, SteerReceipt
from nexus.broker.session_queue import SessionQueue
from nexus.broker.types import AgentIdentity, AgentState, SendAndWaitResult


@dataclass(slots=True)
class SteerInFlight:
    """A queue item handed to the running turn, until its receipt is final."""

    item_id: str
    receipt: SteerReceipt


@dataclass(slots=True)
class AgentSlot:
    """The broker's working copy of one agent (the registry row and queue rows are the truth)."""

    identity: AgentIdentity
    spec: dict[str, object]
    overrides: QueueOverrides = field(default_factory=QueueOverrides)
    queue: SessionQueue = field(default_factory=SessionQueue)
    run: RunHandle | None = None
    steers: list[SteerInFlight] = field(default_factory=list)
    waiters: dict[str, asyncio.Future[SendAndWaitResult]] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    drain_task: asyncio.Task[None] | None = None
    last_activity_ms: int = 0

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self.identity.agent_id

    def state(self) -> AgentState:
        """The seed-003 state derived from the run's phase."""
        if self.run is None:
            return "idle"
        phase = self.run.phase
        if phase == "streaming":
            return "streaming"
        if phase == "compacting":
            return "compacting"
        return "running"

    def resolve(self, item_ids: list[str], result: SendAndWaitResult) -> None:
        """Answer the ``send_and_wait`` callers waiting on these items."""
        for item_id in item_ids:
            future = self.waiters.pop(item_id, None)
            if future is not None and not future.done():
                future.set_result(result)
