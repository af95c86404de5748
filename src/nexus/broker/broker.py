"""``AgentBroker``: named agents, one durable queue per agent session, one run per session at a time.

Write-through: every accepted message is a ``queue_items`` row before ``send`` returns; the
in-memory :class:`SessionQueue` decides what runs next. An agent serves many sessions — its own
and one per session key a message names (a chat sender, a group; see :mod:`nexus.broker.sessions`);
:mod:`nexus.broker._scheduler` takes each ready session's next batch (DESIGN §4.6 mode table) and
:mod:`nexus.broker._batch_runner` runs it on an :class:`AgentRunner` and settles its items, on at
most ``max_concurrent`` runs at once. See docs/broker.md.

Two jobs live beside it: :mod:`nexus.broker._watcher` adopts the messages other processes queue,
:mod:`nexus.broker._replies` sends workers' replies back to agents that asked without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nexus.broker._batch_runner import BatchRunner
from nexus.broker._group_commit import GroupCommitter
from nexus.broker._items import (
    check_message,
    message_source,
    queued,
    session_key_of,
)
from nexus.broker._queue_trace import accept_span, accepted
from nexus.broker._replies import ReplySender
from nexus.broker._scheduler import DrainScheduler
from nexus.broker._slot import AgentSlot, SessionSlot, SteerInFlight
from nexus.broker._watcher import StoreWatcher
from nexus.broker.modes import QueueMode, QueueOverrides, QueueSettings, parse_mode, resolve_settings
from nexus.broker.runner import AgentRunner, ModelCheckingRunner, RunHandle
from nexus.broker.session_queue import AddOutcome, Batch, QueuedMessage
from nexus.broker.sessions import session_label_for
from nexus.broker.types import (
    AgentIdentity,
    AgentMessage,
    AgentSpecError,
    AgentState,
    BrokerError,
    RegisteredAgent,
    SendAndWaitResult,
    SendReceipt,
    UnknownAgentError,
)
from nexus.ledger import new_ulid
from nexus.ledger.broker_store import AcceptRequest, BrokerQueueItem, BrokerStore
from nexus.ledger.errors import LedgerError

if TYPE_CHECKING:
    from nexus.adapters.types import DeliveryTarget
    from nexus.broker.execution import BrokerExecution

DEFAULT_MAX_CONCURRENT = 8
DEFAULT_MAX_ATTEMPTS = 3
_STEERABLE_PHASES = ("starting", "streaming", "tools")


log = logging.getLogger("nexus.broker")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Process-wide broker settings (``[broker]`` in nexus.toml)."""

    queue: QueueSettings = field(default_factory=QueueSettings)
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    max_attempts: int = DEFAULT_MAX_ATTEMPTS


class AgentBroker:
    """Routes messages to named agents through durable per-session queues (seed 003)."""

    def __init__(
        self,
        store: BrokerStore,
        runner: AgentRunner,
        settings: BrokerSettings | None = None,
        *,
        scope: set[str] | None = None,
        reply_text: Callable[[str], str | None] | None = None,
    ) -> None:
        """``scope``: drain only these agents (and any agent they message, added as it happens);
        ``None`` drains every agent. ``nexus send`` uses it to run one conversation, not every queue.
        ``reply_text(turn_id)`` reads a turn's reply from the ledger: with it, replies a crash kept
        from being sent back to an asking agent are sent on start."""
        self._scope = scope
        self._store = store
        self._runner = runner
        self._settings = settings or BrokerSettings()
        self._slots: dict[str, AgentSlot] = {}
        self._scheduler = DrainScheduler(self._settings.max_concurrent, self._step, _now_ms, self._forget_if_idle)
        self._writes = GroupCommitter(store)
        self._started = False
        self._closing = False
        self._watcher = StoreWatcher(store, self._slots, self._load, self._adopted)
        self._replies = ReplySender(self.send, self._slots, store, reply_text)
        self._batches = BatchRunner(
            store, self._writes, runner, self._slots, self._replies.answer_askers, lambda: self._closing, _now_ms
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> list[BrokerQueueItem]:
        """Reload the registry and every pending item, then drain; returns the items failed as exhausted.

        While it runs, the broker also picks up messages other processes queue (``nexus send``
        while a server or a drain holds the broker lock).
        """
        self._watcher.mark_seen()
        exhausted = self._store.fail_exhausted(self._settings.max_attempts)
        for row in self._store.list_agents():
            if row.agent_id in self._slots:  # registered before start (e.g. from nexus.toml): keep its settings
                continue
            identity = AgentIdentity(row.agent_id, row.session_label, "manager" if row.role == "manager" else "worker")
            self._slots[row.agent_id] = AgentSlot(identity=identity, spec=row.spec)
        held = {
            entry.item_id for slot in self._slots.values() for s in slot.sessions.values() for entry in s.queue.items
        }
        for item in self._store.pending():
            if item.id in held:  # sent before start: already queued in memory (twice, it ran twice in a collect batch)
                continue
            slot = self._slots.get(item.agent_id or "")
            if slot is None:
                self._store.fail([item.id], f"agent {item.agent_id!r} is no longer registered")
                continue
            self._load(slot, item)
        self._started = True
        for slot in self._slots.values():
            for session in slot.all_sessions():
                self._ensure_drain(slot, session)
        self._watcher.start()
        await self._replies.answer_unanswered()
        return exhausted

    def _load(self, slot: AgentSlot, item: BrokerQueueItem) -> SessionSlot | None:
        """Put a stored item in its session's queue (``None``: unreadable, failed with the reason)."""
        session = slot.session(item.session_label, session_key_of(item))
        try:
            session.queue.restore(queued(item, max_attempts=self._settings.max_attempts))
        except (ValueError, TypeError, KeyError) as exc:  # a row this version cannot read: kept, not run
            self._store.fail([item.id], f"the stored message cannot be read ({exc!r}); it was not run")
            return None
        return session

    async def close(self) -> None:
        """Stop draining: active runs are aborted (kept as ``aborted`` turns), queues stay durable."""
        self._closing = True
        self._watcher.stop()
        sessions = [session for slot in self._slots.values() for session in slot.all_sessions()]
        for session in sessions:
            if session.run is not None:
                session.run.abort("the broker is shutting down")
        await self._scheduler.close()
        closing = getattr(self._runner, "close", None)  # the engine runner's MCP servers
        if closing is not None:
            await closing()
        await asyncio.sleep(0)  # one loop iteration for the tails of runs that just ended: their model
        # streams then close here, not in asyncio.run's shutdown, which cancels the close half-way
        # ("async generator ignored GeneratorExit" on stderr at the end of every drain)

    # ------------------------------------------------------------------ registry

    def register_agent(
        self, identity: AgentIdentity, *, spec: dict[str, object] | None = None, queue: QueueOverrides | None = None
    ) -> RegisteredAgent:
        """Register (or update) an agent; it persists across restarts.

        Refused, nothing stored, as ``nexus agents add`` and ``POST /v1/agents`` refuse it: a model no
        run could reach (:class:`AgentSpecError`; asked of the runner, which knows the providers), a
        session another agent talks in (:class:`~nexus.ledger.errors.AgentSessionTakenError`, checked by
        the store in the transaction that saves). Both are ``ValueError``\\ s.
        """
        if not identity.agent_id or identity.agent_id in ("user", "system"):
            raise BrokerError(f"{identity.agent_id!r} cannot be an agent id (reserved or empty)")
        model = (spec or {}).get("model")
        if model is not None and isinstance(self._runner, ModelCheckingRunner):
            problem = self._runner.model_problem(str(model))
            if problem is not None:
                raise AgentSpecError(f"agent {identity.agent_id!r}: model: {problem}")
        self._store.save_agent(
            identity.agent_id, role=identity.role, session_label=identity.session_label, spec=spec or {}
        )
        slot = self._slots.get(identity.agent_id)
        if slot is None:
            slot = AgentSlot(identity=identity, spec=spec or {})
            self._slots[identity.agent_id] = slot
        else:
            slot.identity, slot.spec = identity, spec or {}
        if queue is not None:
            slot.overrides = queue
        if self._started:
            for session in slot.all_sessions():
                self._ensure_drain(slot, session)
        return self._registered(slot)

    def get_agent(self, agent_id: str) -> RegisteredAgent | None:
        """The agent registered under ``agent_id``, or ``None``."""
        slot = self._slots.get(agent_id)
        return None if slot is None else self._registered(slot)

    def list_agents(self) -> list[RegisteredAgent]:
        """Every registered agent, by id."""
        return [self._registered(self._slots[agent_id]) for agent_id in sorted(self._slots)]

    def _registered(self, slot: AgentSlot) -> RegisteredAgent:
        return RegisteredAgent(slot.identity, slot.state(), slot.last_activity_ms, slot.queue_depth())

    def _slot(self, agent_id: str) -> AgentSlot:
        slot = self._slots.get(agent_id)
        if slot is None:
            known = ", ".join(sorted(self._slots)) or "none registered"
            raise UnknownAgentError(f"unknown agent {agent_id!r} (known: {known})")
        return slot

    def session_label(self, agent_id: str, session: str | None = None) -> str:
        """The ledger label of ``agent_id``'s session for key ``session`` (its own session for ``None``)."""
        slot = self._slot(agent_id)
        return session_label_for(slot.agent_id, slot.identity.session_label, session)

    def _sessions(self, slot: AgentSlot, session: str | None) -> list[SessionSlot]:
        """Every session of the agent (``None``), or the one of key ``session`` if it exists."""
        if session is None:
            return list(slot.all_sessions())
        found = slot.sessions.get(session_label_for(slot.agent_id, slot.identity.session_label, session))
        return [] if found is None else [found]

    # ------------------------------------------------------------------ sending

    async def send(
        self, message: AgentMessage, queue_mode: str | None = None, *, commit_now: bool = False
    ) -> SendReceipt:
        """Accept ``message`` durably and queue it in its session; see DESIGN §4.6 for each mode.

        ``commit_now``: commit at once rather than with the sends of the next loop iteration
        (:meth:`GroupCommitter.accept`): the HTTP API's choice, for latency while runs share the loop.
        """
        slot = self._slot(message.to)
        check_message(message)
        label = session_label_for(slot.agent_id, slot.identity.session_label, message.session)
        mode_override: QueueMode | None = parse_mode(queue_mode) if queue_mode is not None else None
        settings = resolve_settings(QueueOverrides(mode=mode_override), slot.overrides, default=self._settings.queue)
        message.timestamp = message.timestamp or _now_ms()
        span = accept_span(slot.agent_id, label, message, settings.mode)
        request = AcceptRequest(
            agent_id=slot.agent_id,
            session_label=label,
            message_id=message.id,
            sender=message.from_,
            message=message.to_json(),
            mode=settings.mode,
            log_as_agent_message=message.from_ in self._slots,
            session_key=message.session if label != slot.identity.session_label else None,
        )
        try:
            with span:
                row, created = await self._writes.accept(request, now=commit_now)
                accepted(span, slot.agent_id, settings.mode, row.id, created)
        except ValueError as exc:  # the per-sender session's label is taken by another session
            raise BrokerError(f"message {message.id!r} to {slot.agent_id!r} was not queued: {exc}") from None
        if not created:
            return SendReceipt(message.id, row.id, duplicate=True)
        session = slot.session(row.session_label, message.session)
        queued_message, adopted = self._enqueue(slot, session, row, settings, message)
        slot.last_activity_ms = _now_ms()
        if self._scope is not None and message.from_ in self._scope and slot.agent_id not in self._scope:
            self._scope.add(slot.agent_id)  # the conversation reached another agent: drain it too
        if self._started:
            self._ensure_drain(slot, session)
        if adopted:  # the store watcher already acted on the run with it (a second steer would inject it twice)
            steered = any(steer.item_id == row.id for steer in session.steers)
        else:
            steered = self._deliver_to_run(session, queued_message, settings.mode)
        session.idle.clear()
        return SendReceipt(message.id, row.id, steered=steered)

    def _enqueue(
        self,
        slot: AgentSlot,
        session: SessionSlot,
        row: BrokerQueueItem,
        settings: QueueSettings,
        message: AgentMessage,
    ) -> tuple[QueuedMessage, bool]:
        """Add a freshly accepted row to its session's queue (cap and drop policy applied); ``True``:
        the store watcher had adopted it already."""
        fresh = queued(row, debounce_ms=settings.debounce_ms, message=message)
        adopted = session.queue.find(row.id)
        if adopted is not None:  # the store watcher saw the committed row first: same item, keep its place
            session.queue.retune(adopted, fresh.mode, fresh.debounce_ms)
            return adopted, True
        outcome: AddOutcome = session.queue.add(fresh, settings)
        if not outcome.accepted:
            reason = outcome.rejected_reason or "duplicate"
            self._store.drop([row.id], reason)
            raise BrokerError(f"message {fresh.message_id!r} to {slot.agent_id!r} was not queued: {reason}")
        if outcome.dropped:
            dropped_ids = [item.item_id for item in outcome.dropped]
            self._store.drop(dropped_ids, f"queue cap {settings.cap} reached (drop policy {settings.drop_policy})")
            slot.resolve(dropped_ids, SendAndWaitResult(False, error="dropped: the agent's queue was full"))
        return fresh, False

    def _deliver_to_run(self, session: SessionSlot, queued_message: QueuedMessage, mode: QueueMode) -> bool:
        """Act on the session's active run for the modes that do (steer, steer-backlog, queue, interrupt)."""
        run = session.run
        if run is None:
            session.interrupted = session.interrupted or mode == "interrupt"  # a batch being claimed: it yields
            return False
        if mode == "interrupt":
            run.abort(f"interrupted by message {queued_message.message_id}")
            return False
        if mode not in ("steer", "steer-backlog", "queue") or run.phase not in _STEERABLE_PHASES:
            return False  # not steerable now: it waits for its own turn (followup)
        source = message_source(queued_message.sender, self._slots)
        if mode == "steer-backlog":  # the item also keeps its own turn
            run.steer(queued_message.prompt, item_id=None, one_at_a_time=False, source=source)
            return True
        try:  # claimed first: a claim that fails leaves the item waiting for its own turn, not held by nobody
            self._store.claim([queued_message.item_id])
        except LedgerError as exc:  # a full or locked disk, or finished meanwhile (its batch's claim skips it)
            log.warning("message %s was not steered (it waits for its turn): %s", queued_message.message_id, exc)
            return False
        session.queue.mark_in_flight([queued_message.item_id])
        receipt = run.steer(
            queued_message.prompt, item_id=queued_message.item_id, one_at_a_time=mode == "queue", source=source
        )
        session.steers.append(SteerInFlight(queued_message.item_id, receipt))
        return True

    async def execute(
        self,
        message: AgentMessage,
        queue_mode: str | None = None,
        *,
        target: DeliveryTarget | None = None,
        commit_now: bool = False,
    ) -> BrokerExecution:
        """Send ``message`` and follow the run that consumes it: ``BrokerExecution{stream, result}`` (seed 004).

        See :mod:`nexus.broker.execution`; ``target`` goes into the stream's ``stream_start``;
        ``commit_now`` as for :meth:`send`.
        """
        from nexus.broker.execution import start_execution

        slot = self._slot(message.to)
        label = session_label_for(slot.agent_id, slot.identity.session_label, message.session)

        def current_run() -> RunHandle | None:
            session = slot.sessions.get(label)  # the message's session (created by send, maybe forgotten when idle)
            return None if session is None else session.run

        def waiter(item_id: str) -> asyncio.Future[SendAndWaitResult]:
            future: asyncio.Future[SendAndWaitResult] = asyncio.get_running_loop().create_future()
            slot.waiters[item_id] = future  # resolved when the item is finished, like send_and_wait's
            return future

        return await start_execution(
            lambda: self.send(message, queue_mode, commit_now=commit_now),
            self._runner,
            label,
            target=target,
            current_run=current_run,
            get_item=self._store.get_item,
            waiter=waiter,
        )

    async def send_and_wait(self, message: AgentMessage, timeout_ms: int | None = None) -> SendAndWaitResult:
        """Send, then wait until the turn that consumed the message ends (or ``timeout_ms`` passes)."""
        receipt = await self.send(message)
        if receipt.duplicate:
            return SendAndWaitResult(False, error=f"message {message.id!r} was already accepted earlier")
        slot = self._slot(message.to)
        future: asyncio.Future[SendAndWaitResult] = asyncio.get_running_loop().create_future()
        slot.waiters[receipt.queue_item_id] = future
        try:
            timeout = None if timeout_ms is None else timeout_ms / 1000
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return SendAndWaitResult(False, error=f"no reply within {timeout_ms} ms (the message stays queued)")

    async def interrupt(self, agent_id: str, message: AgentMessage) -> SendReceipt:
        """Abort the run of the message's session (kept as ``aborted``) and run ``message`` with the backlog.

        The session is ``message.session`` (a per-sender session key; ``None``: the agent's own), as
        for :meth:`send`; the agent's other sessions keep running.
        """
        if message.to != agent_id:
            raise BrokerError(f"interrupt({agent_id!r}) got a message addressed to {message.to!r}")
        return await self.send(message, "interrupt")

    # ------------------------------------------------------------------ state

    def get_state(self, agent_id: str, session: str | None = None) -> AgentState:
        """``idle | running | streaming | compacting``: of one session (key), or the busiest of the agent's."""
        slot = self._slot(agent_id)
        if session is None:
            return slot.state()
        found = self._sessions(slot, session)
        return found[0].state() if found else "idle"

    async def wait_for_idle(self, agent_id: str, timeout_ms: int | None = None, *, session: str | None = None) -> bool:
        """Wait until the agent (or its session ``session``) has no run and nothing runnable; ``False`` on timeout."""
        slot = self._slot(agent_id)

        async def settle() -> None:
            while busy := [s for s in self._sessions(slot, session) if not s.is_idle()]:
                for one in busy:
                    await one.idle.wait()

        try:
            await asyncio.wait_for(settle(), None if timeout_ms is None else timeout_ms / 1000)
        except TimeoutError:
            return False
        return True

    async def wait_until_idle(self, agent_ids: set[str] | None = None) -> None:
        """Wait until every agent of ``agent_ids`` (default: every drained one) is idle at the same time."""
        while True:
            wanted = sorted(agent_ids if agent_ids is not None else (self._scope or set(self._slots)))
            busy = [a for a in wanted if a in self._slots and not self._is_idle(self._slots[a])]
            if not busy:
                return
            for agent_id in busy:
                await self.wait_for_idle(agent_id)

    @staticmethod
    def _is_idle(slot: AgentSlot) -> bool:
        return all(session.is_idle() for session in slot.all_sessions())

    def abort(self, agent_id: str, session: str | None = None) -> bool:
        """Abort the agent's current runs (or its session's); queues keep draining. ``False``: none ran."""
        runs = [s.run for s in self._sessions(self._slot(agent_id), session) if s.run is not None]
        for run in runs:
            run.abort("aborted on request")
        return bool(runs)

    def get_queue_depth(self, agent_id: str, session: str | None = None) -> int:
        """Messages waiting for the agent, or in one of its sessions (not counting those runs hold)."""
        return sum(len(s.queue.waiting()) for s in self._sessions(self._slot(agent_id), session))

    def clear_queue(self, agent_id: str, session: str | None = None) -> int:
        """Drop every waiting message of the agent, or of one session (``dropped``, reason recorded)."""
        slot = self._slot(agent_id)
        removed = [item.item_id for s in self._sessions(slot, session) for item in s.queue.clear()]
        self._store.drop(removed, "cleared by clear_queue")
        slot.resolve(removed, SendAndWaitResult(False, error="dropped: the queue was cleared"))
        return len(removed)

    # ------------------------------------------------------------------ draining

    def _ensure_drain(self, slot: AgentSlot, session: SessionSlot) -> None:
        """Have the scheduler look at the session (it queues, times or idles it; see :mod:`._scheduler`)."""
        if self._scope is not None and slot.agent_id not in self._scope:
            return
        self._scheduler.schedule(slot, session)

    async def _step(self, slot: AgentSlot, session: SessionSlot) -> None:
        """One batch of the session, on a worker: what its queue says is next (nothing if it changed)."""
        step = session.queue.next_batch(_now_ms())
        if isinstance(step, Batch):
            await self._batches.run(slot, session, step)

    def _adopted(self, slot: AgentSlot, session: SessionSlot) -> None:
        """A message another process queued was loaded into the session (its last item): drained, and
        an ``interrupt`` or steer acts on the session's run as one sent here does (it used to only wait
        for its turn: ``nexus send --mode interrupt`` beside a server never cut the running turn)."""
        self._ensure_drain(slot, session)
        item = session.queue.items[-1]
        self._deliver_to_run(session, item, item.mode)

    @staticmethod
    def _forget_if_idle(slot: AgentSlot, session: SessionSlot) -> None:
        """An idle per-sender session is forgotten (its rows are the truth): a bot that talked to
        10,000 people keeps no queue for those who are quiet."""
        if session.key is not None and slot.sessions.get(session.label) is session:
            del slot.sessions[session.label]


def new_message_id() -> str:
    """A fresh message id (a ULID: sortable by time)."""
    return new_ulid()
