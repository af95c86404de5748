"""What the broker needs from whatever runs a turn: a small protocol, so the queue logic is testable.

The engine's ``Runtime`` implements it for real (see ``nexus.broker.engine_runner``); tests use
their own. The contract that keeps messages safe:

* ``start`` receives the queue item ids the turn consumes; the runner marks them delivered in
  the same transaction that writes the turn (``BrokerStore.deliver(..., conn=...)``), so an
  item is never delivered without its turn, nor a turn written without its items marked;
* a steer handed to a run is owned by the run until its receipt is final: ``delivered`` (it
  went into the turn, and is marked with the turn like the others) or ``returned`` (the run
  ended first; the broker puts it back at the front of the queue). By the time ``result()``
  resolves, every receipt of the run is final.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

RunPhase = Literal["starting", "streaming", "tools", "compacting", "finishing", "done"]
SteerStatus = Literal["pending", "delivered", "returned"]
RunStatus = Literal["completed", "failed", "aborted"]


class SteerReceipt(Protocol):
    """The run's answer to a steer; final (not ``pending``) once the run's result has resolved."""

    @property
    def status(self) -> SteerStatus:
        """``pending`` until the run injects it (``delivered``) or gives it back (``returned``)."""
        ...


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How one run ended, as the broker needs to know it."""

    status: RunStatus
    turn_id: str | None = None
    reply: str = ""
    error: str | None = None


class RunHandle(Protocol):
    """A running turn of one agent's session."""

    @property
    def phase(self) -> RunPhase:
        """Where the run is now (DESIGN §4.4 execution states)."""
        ...

    def steer(self, text: str, *, item_id: str | None, one_at_a_time: bool, source: str = "steer") -> SteerReceipt:
        """Inject ``text`` at the run's next safe point; ``item_id`` is marked delivered with the turn.

        ``source``: who sent it (``user``, ``agent:<id>``, ``telegram:42`` …), stored with the message.
        """
        ...

    def abort(self, reason: str) -> None:
        """Stop the run; it ends ``aborted`` with its partial output written."""
        ...

    async def result(self) -> RunOutcome:
        """Wait for the run to end (never raises for a failed run: ``status='failed'``)."""
        ...


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One turn to run for an agent."""

    agent_id: str
    session_label: str
    prompt: str
    item_ids: tuple[str, ...]
    sender: str | None = None
    source: str | None = None
    """Where the turn's message came from (``user``, ``agent:<id>``, ``telegram:42`` …; ``collect`` for a
    batch from several senders): stored as the ``source`` of the turn's query message."""
    spec: dict[str, object] = field(default_factory=dict)
    role: str = "worker"
    conversation_id: str | None = None
    """The conversation the consumed messages belong to (the first one's): agent tools continue it."""
    hop: int = 0
    """How many agent-to-agent messages led here (the highest of the batch): bounds delegation loops."""
    session_key: str | None = None
    """The key of the per-sender session this turn runs in (``None``: the agent's own session)."""
    deliver_to: dict[str, object] | None = None
    """Where the reply goes (``metadata.deliver_to`` of the newest consumed message that has one):
    an inbound chat message's reply returns to its chat (see ``nexus.adapters.inbound``)."""


class AgentRunner(Protocol):
    """Starts turns; one call per turn, never two at once for the same session (the broker ensures it)."""

    def start(self, request: RunRequest) -> RunHandle:
        """Begin the turn (it runs in the background until ``result()`` resolves)."""
        ...


@runtime_checkable
class ModelCheckingRunner(Protocol):
    """A runner that knows which models its runs can reach: the broker refuses an agent with any other."""

    def model_problem(self, ref: str) -> str | None:
        """Why no run could ever reach model ``ref`` (an unknown provider...), or ``None``."""
        ...
