"""One registered agent's live state inside the broker: its sessions (each a queue and a run), its waiters.

An agent serves many sessions — its own and one per sender an adapter routes to it (see
:mod:`nexus.broker.sessions`). Each :class:`SessionSlot` has its own queue and at most one
run (the broker's scheduler decides when); the agent-level views (state, queue depth) aggregate over them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nexus.broker.modes import NO_OVERRIDES, QueueOverrides
from nexus.broker.session_queue import QueuedMessage, SessionQueue
from nexus.broker.types import AgentIdentity, AgentState, SendAndWaitResult

if TYPE_CHECKING:
    from nexus.agent import AgentTool
    from nexus.broker.agent_tools import CallerContext
    from nexus.engine import AgentSpec, Execution, SteerReceipt
    from nexus.ledger import Lease

_STATE_RANK: dict[AgentState, int] = {"idle": 0, "running": 1, "compacting": 2, "streaming": 3}


@dataclass(slots=True)
class SteerInFlight:
    """A queue item handed to the running turn, until its receipt is final."""

    item_id: str
    receipt: SteerReceipt


@dataclass(slots=True)
class SessionSlot:
    """One session of an agent: its queue, its run (one at a time), where it is in the run line."""

    label: str
    key: str | None = None
    """The session key the session was opened for (``None``: the agent's own session)."""
    queue: SessionQueue = field(default_factory=SessionQueue)
    run: Execution | None = None
    """The session's run (one at a time), from the moment it is started."""
    steers: list[SteerInFlight] = field(default_factory=list)
    claiming: dict[str, asyncio.Future[bool]] = field(default_factory=dict)
    """Messages being claimed to steer into the run, each with whether it was steered (once committed)."""
    delivering: set[str] = field(default_factory=set)
    """The reply targets the current run is delivered to (a steered message's own target joins it)."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    scheduled: bool = False
    """In the line of sessions waiting for a worker (:mod:`nexus.broker._scheduler`)."""
    active: bool = False
    """A worker is running this session's batch."""
    timer: asyncio.TimerHandle | None = None
    """Set while a ``collect`` batch waits for its quiet window to end."""
    interrupted: bool = False
    """An ``interrupt`` came while no run could be aborted: the batch being claimed goes back instead."""
    lease: Lease | None = None
    """The session's lease while this broker holds it (brokers sharing a database: docs/scaling.md)."""
    lease_fresh_until: float = 0.0
    """Until when (monotonic) the held lease is used for the next batch without asking the database."""
    lease_valid_until: float = 0.0
    """Until when (monotonic) the held lease holds for sure: when its last acquire or renewal was sent, plus its
    time to live (past it, another process may have taken the session over)."""
    lease_lost: bool = False
    """A run here lost the session's lease (it may have left its turn open): the next tenure recovers it first."""
    parked_until: float = 0.0
    """Until when (monotonic) the session waits because another broker runs it (its timer is armed)."""
    overflow_epoch: int | None = None
    """The lease epoch under which this broker last took the session's owed ``[Queue overflow]`` drops: a new
    tenure looks again (another broker may have dropped messages of the session meanwhile)."""
    overflow_carrier: str | None = None
    """The queue item whose turn last took a ``[Queue overflow]`` summary: handed back, its next batch looks again."""
    plain_caller: CallerContext | None = None
    """The caller of a turn of one plain message (no conversation, hop 0, no reply target): the same for every
    such turn of the session, so made once, not for every run."""
    plain_tools: list[AgentTool] | None = None
    """The agent tools of the last turn of the plain caller: the next such turn takes them as they are unless that
    turn started a conversation (:func:`~nexus.broker.agent_tools.conversation_started`)."""

    def state(self) -> AgentState:
        """The seed-003 state of the session's run (``running`` while it starts, runs tools or finishes)."""
        return "idle" if self.run is None else run_state(self.run)

    def is_idle(self) -> bool:
        """No run, nothing queued and no worker on it (an item taken for a run that is still being claimed
        counts as busy, and so does a batch whose run ended while it still answers the agents that asked:
        their replies are being queued, and the conversation goes on with them)."""
        return self.run is None and not self.queue.items and not self.active


@dataclass(slots=True)
class AgentSlot:
    """The broker's working copy of one agent (the registry row and queue rows are the truth)."""

    identity: AgentIdentity
    spec: AgentSpec
    """How the agent runs (its ``id`` and ``role`` are the identity's)."""
    overrides: QueueOverrides = NO_OVERRIDES
    sessions: dict[str, SessionSlot] = field(default_factory=dict)
    last_activity_ms: int = 0
    beside: set[Execution] = field(default_factory=set)
    """The agent's runs started beside its queues (:mod:`nexus.broker._beside`), while they run."""
    beside_asked: dict[asyncio.Future[Any], str | None] = field(default_factory=dict)
    """Runs asked for beside its queues and not started yet (waiting for a run slot, or starting): each one's
    future (done once it started or never will), with the session label it will talk in when its caller said."""
    agent_id: str = field(init=False)
    """The agent's id (its identity's, which a new registration replaces but never renames; read several
    times per message, so an attribute rather than a property)."""

    def __post_init__(self) -> None:
        self.agent_id = self.identity.agent_id

    def session(self, label: str, key: str | None = None) -> SessionSlot:
        """The session slot for ``label`` (created on first use)."""
        found = self.sessions.get(label)
        if found is None:
            found = self.sessions[label] = SessionSlot(label, None if label == self.identity.session_label else key)
        return found

    def all_sessions(self) -> Iterator[SessionSlot]:
        """Every session slot of the agent (a copy of the list: safe while sessions are added)."""
        return iter(list(self.sessions.values()))

    def state(self) -> AgentState:
        """The busiest state over the agent's sessions and runs beside them (``streaming`` > ``compacting`` >
        ``running``)."""
        return busiest([session.state() for session in self.sessions.values()] + self.beside_states(None))

    def beside_states(self, labels: Collection[str] | None) -> list[AgentState]:
        """The states of the runs beside the queues that have not ended (``labels``: only those in these sessions)."""
        return [run_state(run) for run in self._beside_running(labels)]

    def _beside_running(self, labels: Collection[str] | None) -> Iterator[Execution]:
        """The runs beside the queues that have not ended (``labels``: only those in these sessions)."""
        for run in self.beside:
            if not run.result.done() and (labels is None or run.session_label in labels):
                yield run

    def beside_busy(self, labels: Collection[str] | None) -> list[asyncio.Future[Any]]:
        """What keeps the agent (``labels``: its session of these labels) busy beside its queues: the result of
        each run there that has not ended, and each run asked for that has not started yet (one whose caller
        did not say its session counts for every session)."""
        busy: list[asyncio.Future[Any]] = [run.result for run in self._beside_running(labels)]
        for asked, label in self.beside_asked.items():
            if not asked.done() and (labels is None or label is None or label in labels):
                busy.append(asked)
        return busy

    def queue_depth(self) -> int:
        """Messages waiting over every session (not counting those runs hold)."""
        return sum(len(session.queue.waiting()) for session in self.sessions.values())


def busiest(states: Iterable[AgentState]) -> AgentState:
    """The busiest of ``states`` (``streaming`` > ``compacting`` > ``running`` > ``idle``; ``idle`` if none)."""
    return max(states, key=_STATE_RANK.__getitem__, default="idle")


def run_state(run: Execution) -> AgentState:
    """The seed-003 state of a run (``running`` while it starts, runs tools or finishes)."""
    state = run.state
    return state if state in ("streaming", "compacting") else "running"


def settle(items: Iterable[QueuedMessage], result: SendAndWaitResult) -> None:
    """Tell the senders of these messages how they ended (their receipts' ``outcome``)."""
    for item in items:
        if item.ticket is not None:
            item.ticket.settle(result)
