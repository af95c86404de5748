"""The broker's public types (seed 003 in snake_case): identities, messages, states, receipts, results."""

from __future__ import annotations

import asyncio
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from nexus._dataclass import dataclass
from nexus.errors import NexusError
from nexus.ledger import new_ulid  # loaded with the broker anyway: an import in the function ran at every id

if TYPE_CHECKING:
    from collections.abc import Callable

    from nexus.adapters import DeliveryTarget
    from nexus.engine import AgentSpec, Execution, Subscription
    from nexus.ledger import AgentRow

Followed = tuple["Execution", "Subscription"]
"""A run and a subscription to its events from its start (see :meth:`SendReceipt.follow`)."""

AgentRole = Literal["manager", "worker"]
AgentState = Literal["idle", "running", "streaming", "compacting"]
"""``idle``: no run and nothing runnable; ``running``: a run is active (tools, starting, finishing);
``streaming``: the model is producing output; ``compacting``: the run is summarising its context."""

MAX_CONTENT_CHARS = 1_000_000
"""A message longer than this is refused at ``send`` (it would not fit any model's context)."""


class BrokerError(NexusError):
    """A broker call that cannot be done as asked; the message says what and why."""


class QueueFullError(BrokerError):
    """The agent's queue was full and its drop policy is ``new``: the message was refused, not queued (a send
    later may find room). HTTP answers it 429 ``queue_full``, as it does the other cap drops."""


class UnknownAgentError(BrokerError, LookupError):
    """No agent is registered under this id."""


class AgentSpecError(BrokerError, ValueError):
    """An agent registration no run could use (a model no run could reach); nothing is stored."""


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """Who an agent is: its id, the session it talks in, and its role."""

    agent_id: str
    session_label: str
    role: AgentRole = "worker"


def stored_agent(row: AgentRow) -> tuple[AgentIdentity, AgentSpec]:
    """An agent as the registry stores it: its identity, and its spec decoded from the stored JSON."""
    from nexus.engine import AgentSpec

    identity = AgentIdentity(row.agent_id, row.session_label, "manager" if row.role == "manager" else "worker")
    return identity, AgentSpec.from_json(row.spec, agent_id=row.agent_id, role=identity.role)


@dataclass(slots=True)
class AgentMessage:
    """A message to an agent, from a user, another agent or the system (``from`` on the wire)."""

    id: str
    from_: str
    to: str
    content: str
    timestamp: int = 0
    conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    """The session key this message belongs to (``dm:telegram:42``...); ``None``: the agent's own session.

    An agent serves many sessions: each key gets its own queue and ledger session (see
    :func:`nexus.broker.sessions.session_label_for`), one run at a time per session."""

    def deliver_reply(self, target: DeliveryTarget) -> None:
        """Keep where the reply goes with the message (``metadata.deliver_to``, as an inbound chat message's):
        whichever broker runs it streams the reply there and records the delivery, also after a restart."""
        self.metadata["deliver_to"] = target.to_json()

    def to_json(self) -> dict[str, Any]:
        """The wire form, with ``from`` as seed 003 names it (``session`` only when set)."""
        data: dict[str, Any] = {
            "id": self.id,
            "from": self.from_,
            "to": self.to,
            "content": self.content,
            "timestamp": self.timestamp,
            "conversation_id": self.conversation_id,
            "metadata": self.metadata,
        }
        if self.session is not None:
            data["session"] = self.session
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentMessage:
        """Inverse of :meth:`to_json`."""
        return cls(
            id=str(data["id"]),
            from_=str(data.get("from", "user")),
            to=str(data["to"]),
            content=str(data.get("content", "")),
            timestamp=int(data.get("timestamp") or 0),
            conversation_id=data.get("conversation_id"),
            metadata=dict(data.get("metadata") or {}),
            session=str(data["session"]) if data.get("session") else None,
        )


@dataclass(frozen=True, slots=True)
class RegisteredAgent:
    """A registered agent as the broker sees it now."""

    identity: AgentIdentity
    state: AgentState
    last_activity: int
    queue_depth: int


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """What ``send`` did: the queue item that holds the message (durable before this returns).

    The receipt also follows the message: ``await receipt.execution()`` is the run it is handed to
    (started for it, or the running turn it was steered into), ``await receipt.follow()`` the same with
    its events from the start, ``await receipt.outcome()`` how the turn that consumed it ended,
    ``receipt.abort()`` withdraws it.
    """

    message_id: str
    queue_item_id: str
    duplicate: bool = False
    """True when a message with this id was already accepted: nothing new was queued."""
    steered: bool = False
    """True when the message was also handed to the agent's running turn."""
    pushed_out: tuple[str, ...] = ()
    """The ids of older messages the session's queue cap dropped to make room for this one (policies
    ``old`` and ``summarize``): settled ``dropped`` before this returns, so their senders can be told."""
    ticket: Ticket | None = field(default=None, repr=False, compare=False)
    """The broker's side of the message (``None``: a duplicate of a message that already finished)."""

    async def execution(self) -> Execution | None:
        """The run that holds the message, or last held it; waits until one takes it.

        ``None`` when no run of this broker will take it: it was dropped, failed before a run, or (a
        duplicate) finished earlier.
        """
        return None if self.ticket is None else await self.ticket.execution()

    def follow(self) -> asyncio.Future[Followed | None]:
        """:meth:`execution` with a subscription to its events, made as the run is handed over: every
        event of a run that takes the message after this call (from now on, for one that holds it already)."""
        if self.ticket is None:
            done: asyncio.Future[Followed | None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        return self.ticket.follow()

    async def outcome(self) -> SendAndWaitResult:
        """How the message ended: the reply of the turn that consumed it, or why it was not run."""
        if self.ticket is None:
            return SendAndWaitResult(False, error=f"message {self.message_id!r} was already accepted earlier")
        return await self.ticket.outcome()

    def abort(self, reason: str = "aborted by its sender") -> None:
        """Withdraw the message: its run is aborted once its turn has begun (the turn is written ``aborted``,
        with the message: it is consumed, never run again), also when it is still queued now."""
        if self.ticket is not None:
            self.ticket.abort(reason)


class Ticket:
    """One accepted message, from its sender's side: the runs it is handed to, and how it is settled.

    The broker holds it with the queued message and tells it (:meth:`hand`) each run that takes the
    message, and (:meth:`settle`) how the message ended, once. Nothing is looked up: whoever holds
    the receipt holds the ticket.
    """

    __slots__ = ("_abort", "_followers", "_waiters", "current", "on_settle", "result")

    def __init__(self, result: SendAndWaitResult | None = None) -> None:
        self.current: Execution | None = None
        self.result = result
        self.on_settle: Callable[[], None] | None = None
        """Called as the message is settled, before any waiter resumes (a waiting asker's seat is wanted
        back then: :mod:`nexus.broker._lending`)."""
        self._abort: str | None = None
        self._waiters: list[asyncio.Future[None]] | None = None
        self._followers: list[asyncio.Future[Followed | None]] | None = None
        """Made by the first waiter or follower: most messages have neither, and every send makes a ticket."""

    def hand(self, execution: Execution) -> None:
        """A run took the message (it has not begun): followers subscribe now, a withdrawal applies to it."""
        self.current = execution
        if self._abort is not None:
            _abort_once_begun(execution, self._abort)
        if self._followers:  # most messages have none
            followers, self._followers = self._followers, None
            for follower in followers:
                if not follower.done():
                    follower.set_result((execution, execution.subscribe()))
        if self._waiters:
            self._wake()

    def settle(self, result: SendAndWaitResult) -> None:
        """The message ended (consumed by a turn, dropped, failed): its outcome; the first settlement stays."""
        if self.result is not None:
            return
        self.result = result
        if self.on_settle is not None:
            self.on_settle()
        if self._followers:
            followers, self._followers = self._followers, None
            for follower in followers:
                if not follower.done():
                    follower.set_result(None)
        if self._waiters:
            self._wake()

    def abort(self, reason: str) -> None:
        """See :meth:`SendReceipt.abort`."""
        self._abort = reason
        if self.current is not None:
            _abort_once_begun(self.current, reason)

    async def execution(self) -> Execution | None:
        """See :meth:`SendReceipt.execution`."""
        while self.current is None and self.result is None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters = self._waiters or []
            self._waiters.append(waiter)
            await waiter
        return self.current

    def follow(self) -> asyncio.Future[Followed | None]:
        """See :meth:`SendReceipt.follow` (registered at the call)."""
        follower: asyncio.Future[Followed | None] = asyncio.get_running_loop().create_future()
        if self.current is not None:
            follower.set_result((self.current, self.current.subscribe()))
        elif self.result is not None:
            follower.set_result(None)
        else:
            self._followers = self._followers or []
            self._followers.append(follower)
        return follower

    async def outcome(self) -> SendAndWaitResult:
        """See :meth:`SendReceipt.outcome`."""
        while self.result is None:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters = self._waiters or []
            self._waiters.append(waiter)
            await waiter
        return self.result

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters or [], None
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _abort_once_begun(execution: Execution, reason: str) -> None:
    """Abort ``execution`` once its turn has begun (aborted while it still starts, it would hand the
    message back to its queue and it would run again)."""
    if execution.turn_id is not None or execution.state == "done":
        execution.abort(reason)
        return

    def on_event(item: Any) -> None:
        if item.type == "run_start":
            execution.abort(reason)

    execution.on_event(on_event)


@dataclass(frozen=True, slots=True)
class SendAndWaitResult:
    """The outcome of ``send_and_wait`` (seed 003's ``{success, error}`` plus the reply text)."""

    success: bool
    error: str | None = None
    reply: str | None = None
    turn_id: str | None = None


def new_message_id() -> str:
    """A fresh message id (a ULID: sortable by time)."""
    return new_ulid()
