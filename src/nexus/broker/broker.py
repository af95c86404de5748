"""``AgentBroker``: named agents, one durable queue per agent session, one run per session at a time.

Write-through: every accepted message is a ``queue_items`` row before ``send`` returns; the
in-memory :class:`SessionQueue` decides what runs next. An agent serves many sessions — its own
and one per session key a message names (a chat sender, a group; see :mod:`nexus.broker.sessions`);
:mod:`nexus.broker._scheduler` takes each ready session's next batch (DESIGN §4.6 mode table) and
:mod:`nexus.broker._batch_runner` runs it through the engine's ``Runtime.start`` and settles its items, on
at most ``max_concurrent`` runs at once. The :class:`~nexus.engine.Execution` of each run is handed to
the senders of the messages it takes (their :class:`SendReceipt`) and to the deliverer of its reply
target; nobody looks a run up. See docs/broker.md.

Two jobs live beside it: :mod:`nexus.broker._watcher` adopts the messages other processes queue,
:mod:`nexus.broker._replies` sends workers' replies back to agents that asked without waiting. A send's accept
(the durable row, its place in the session's queue, the cap's drops) is :mod:`nexus.broker._intake`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from nexus.broker._adopt_cap import CappedAdoption, drop_and_tell
from nexus.broker._batch_runner import BatchRunner
from nexus.broker._beside import BesideRuns
from nexus.broker._hops import ConversationHops
from nexus.broker._intake import Intake
from nexus.broker._items import check_message, queued, session_key_of
from nexus.broker._leases import session_leases
from nexus.broker._replies import ReplySender
from nexus.broker._scheduler import DrainScheduler
from nexus.broker._slot import AgentSlot, SessionSlot, busiest
from nexus.broker._steer_in import RunSteerer
from nexus.broker._steer_in import steered as steered_in
from nexus.broker._takeover import Takeover
from nexus.broker._watcher import StoreWatcher
from nexus.broker.agent_tools import CallerContext, broker_tools, caller_tool
from nexus.broker.modes import QueueOverrides, send_settings
from nexus.broker.session_queue import Batch
from nexus.broker.sessions import session_label_for
from nexus.broker.settings import BrokerSettings
from nexus.broker.smart import SmartRoutingFace
from nexus.broker.types import (
    AgentIdentity,
    AgentMessage,
    AgentSpecError,
    AgentState,
    BrokerError,
    RegisteredAgent,
    SendAndWaitResult,
    SendReceipt,
    Ticket,
    UnknownAgentError,
    stored_agent,
)
from nexus.ledger import AcceptRequest, BrokerStore, QueueItem

if TYPE_CHECKING:
    from asyncio import Future

    from nexus.agent import AgentTool
    from nexus.broker._batch_runner import Deliver
    from nexus.broker._beside import BeginBeside
    from nexus.engine import AgentSpec, Execution, Runtime
    from nexus.ledger import Ledger

log = logging.getLogger("nexus.broker")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AgentBroker(SmartRoutingFace):
    """Routes messages to named agents through durable per-session queues (seed 003); smart routing's
    ``route_smart``, ``fork_from``, ``set_routing_mode`` and ``send_routed`` come from :mod:`nexus.broker.smart`."""

    def __init__(
        self,
        ledger: Ledger,
        runtime: Runtime,
        settings: BrokerSettings | None = None,
        *,
        scope: set[str] | None = None,
        reply_text: Callable[[str], Awaitable[str | None]] | None = None,
        deliver: Deliver | None = None,
    ) -> None:
        """The queue is ``ledger.queue`` (its accepts and claims commit in shared transactions), the registry
        ``ledger.agents``; ``runtime`` starts the runs (``Runtime.start``). ``scope``: drain only these agents (and any
        agent they message, added as it happens); ``None`` drains every agent. ``nexus send`` uses it to
        run one conversation, not every queue. ``reply_text(turn_id)`` reads a turn's reply from the
        ledger: with it, replies a crash kept from being sent back to an asking agent are sent on start.
        ``deliver(execution, target, queue_item_id)`` streams the reply of a run whose messages carry a
        reply target (``metadata.deliver_to``) there: an inbound chat's, ``--deliver``'s."""
        self._scope = scope
        self._queue = ledger.queue
        self._agents = ledger.agents
        self._registry = BrokerStore(ledger.database)  # register_agent is synchronous (see its docstring)
        self._runtime = runtime
        self._settings = settings or BrokerSettings()
        self._slots: dict[str, AgentSlot] = {}
        self._shared_tools: list[AgentTool] | None = None
        self._scheduler = DrainScheduler(self._settings.max_concurrent, self._step, _now_ms, self._forget_if_idle)
        self._beside = BesideRuns(self._scheduler, self._agent_tools, self._settings.max_hops)
        self._started = False
        self._closing = False
        self._intake = Intake(ledger.queue)
        adoption = CappedAdoption(self._load, self._settings, self._intake.drop)  # the cap applies to adopted rows too
        self._watcher = StoreWatcher(ledger, self._slots, adoption.load, self._adopted)
        self._watcher.interval_s = self._settings.poll_ms / 1000
        self._intake.watched_by(self._watcher)  # it leaves alone the rows of sends and drops in flight
        self._ledger_wakeups = ledger.wakeups
        self.hops = ConversationHops()  # the agent tools number each ask past its conversation's highest hop
        self._replies = ReplySender(self.send, self._slots, ledger.queue, reply_text, self.hops)
        self._batches = BatchRunner(
            ledger.queue, runtime, self._slots, self._agent_tools, self._replies.answer_askers,
            lambda: self._closing, _now_ms,
        )  # fmt: skip
        self._batches.deliver, self._batches.max_hops = deliver, self._settings.max_hops
        self._leases = self._batches.leases = session_leases(ledger, self._settings.leases, self._settings.lease_ttl_ms)
        adoption.capped = self._leases is None  # several brokers: each caps what it accepts (see _adopt_cap)
        self._steerer = RunSteerer(ledger.queue, self._slots, deliver, leased=self._leases is not None)
        if self._leases is not None:
            takeover = Takeover(
                self._leases, ledger.leases, ledger.queue, self._settings.max_attempts, self._watcher.slot_for,
                self._load, self._watcher.held, self._scheduler.wake,
            )  # fmt: skip
            self._watcher.sweep, self._batches.reload = takeover.sweep, takeover.reload
            self._watcher.sweep_every_s = self._settings.lease_ttl_ms / 2000

    def on_takeover(self, callback: Callable[[str, str], object]) -> None:
        """``callback(session_label, prior_holder)`` at each takeover of a dead holder's session (under leases)."""
        if self._leases is not None:
            self._leases.on_takeover = callback

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> list[QueueItem]:
        """Reload the registry and every pending item, then drain; returns the items failed as exhausted.

        While it runs, the broker also picks up messages other processes queue (``nexus send``
        while a server or a drain holds the broker lock).
        """
        await self._watcher.mark_seen()
        exhausted = await self._queue.fail_exhausted(self._settings.max_attempts)
        for row in await self._agents.list():
            if row.agent_id in self._slots:  # registered before start (e.g. from nexus.toml): keep its settings
                continue
            identity, spec = stored_agent(row)
            self._slots[row.agent_id] = AgentSlot(identity=identity, spec=spec)
        held = {
            entry.item_id for slot in self._slots.values() for s in slot.sessions.values() for entry in s.queue.items
        }
        for item in await self._queue.pending():
            if item.id in held:  # sent before start: already queued in memory (twice, it ran twice in a collect batch)
                continue
            slot = self._slots.get(item.agent_id or "")
            if slot is None:
                await self._queue.settle([item.id], "failed", reason=f"agent {item.agent_id!r} is no longer registered")
                continue
            await self._load(slot, item)
        self._started = True
        for slot in self._slots.values():
            for session in slot.all_sessions():
                self._ensure_drain(slot, session)
        listener = self._ledger_wakeups if self._settings.wakeups == "notify" else None
        self._watcher.start(listener, self._wake_session)
        await self._replies.answer_unanswered()
        return exhausted

    async def _load(self, slot: AgentSlot, item: QueueItem) -> SessionSlot | None:
        """Put a stored item in its session's queue (``None``: unreadable, failed with the reason, or held here
        already: the store watcher and a takeover may both have read it before either loaded it, and a twin
        of one item ran twice in one turn in the fault bench)."""
        session = slot.session(item.session_label, session_key_of(item))
        if session.queue.find(item.id) is not None:
            return None
        try:
            session.queue.restore(queued(item, max_attempts=self._settings.max_attempts))
        except (ValueError, TypeError, KeyError) as exc:  # a row this version cannot read: kept, not run
            reason = f"the stored message cannot be read ({exc!r}); it was not run"
            await self._queue.settle([item.id], "failed", reason=reason)
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
        await asyncio.gather(self._scheduler.close(), self._beside.close("the broker is shutting down"))
        if self._leases is not None:  # held between batches: another broker may take them at once
            for session in sessions:
                await self._leases.let_go(session)
        await asyncio.sleep(0)  # one loop iteration for the tails of runs that just ended: their model
        # streams then close here, not in asyncio.run's shutdown, which cancels the close half-way
        # ("async generator ignored GeneratorExit" on stderr at the end of every drain)

    # ------------------------------------------------------------------ registry

    def register_agent(
        self, identity: AgentIdentity, *, spec: AgentSpec | None = None, queue: QueueOverrides | None = None,
        stored: bool = False,
    ) -> RegisteredAgent:  # fmt: skip
        """Register (or update) an agent; it persists across restarts.

        ``spec`` says how it runs (its ``id`` and ``role`` are the identity's). Refused, nothing stored,
        as ``nexus agents add`` and ``POST /v1/agents`` refuse it: a model no run could reach
        (:class:`AgentSpecError`; asked of the runtime, which knows the providers), a
        session another agent talks in (:class:`~nexus.ledger.errors.AgentSessionTakenError`, checked by
        the store in the transaction that saves). Both are ``ValueError``\\ s. Synchronous, for callers outside
        a loop (``nexus.toml``'s agents, the CLI): it writes through the registry's synchronous rows.
        ``stored``: the registry already holds exactly this agent (the caller read or saved its row off
        the event loop); nothing is written, so nothing waits for the database here.
        """
        if not identity.agent_id or identity.agent_id in ("user", "system"):
            raise BrokerError(f"{identity.agent_id!r} cannot be an agent id (reserved or empty)")
        model = spec.model if spec is not None else None
        if isinstance(model, str):
            problem = self._runtime.model_problem(model)
            if problem is not None:
                raise AgentSpecError(f"agent {identity.agent_id!r}: model: {problem}")
        full = replace(spec or _default_spec(), id=identity.agent_id, role=identity.role)
        if not stored:
            self._registry.save_agent(
                identity.agent_id, role=identity.role, session_label=identity.session_label, spec=full.to_json()
            )
        slot = self._slots.get(identity.agent_id)
        if slot is None:
            slot = AgentSlot(identity=identity, spec=full)
            self._slots[identity.agent_id] = slot
        else:
            slot.identity, slot.spec = identity, full
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

    async def send(self, message: AgentMessage, queue_mode: str | None = None) -> SendReceipt:
        """Accept ``message`` durably and queue it in its session; see DESIGN §4.6 for each mode.

        The accept commits with the other accepts and claims of the loop iteration (``ledger.queue``).
        """
        slot = self._slot(message.to)
        check_message(message)
        label = session_label_for(slot.agent_id, slot.identity.session_label, message.session)
        settings = send_settings(queue_mode, slot.overrides, self._settings.queue)
        message.timestamp = message.timestamp or _now_ms()
        # Positional (agent, label, id, sender, message, mode, logged, session key): a class called with keywords
        # builds a dict of them and unpacks it again, for every message.
        request = AcceptRequest(
            slot.agent_id, label, message.id, message.from_, message.to_json(), settings.mode,
            message.from_ in self._slots, message.session if label != slot.identity.session_label else None,
        )  # fmt: skip
        accepted = await self._intake.accept(slot, message, request, settings)
        if isinstance(accepted, SendReceipt):  # a duplicate: the first accept's receipt
            return accepted
        row, session, queued_message, adopted, pushed_out = accepted
        ticket = queued_message.ticket = queued_message.ticket or Ticket()
        slot.last_activity_ms = row.enqueued_at  # accepted then (no second clock read)
        if self._scope is not None and message.from_ in self._scope and slot.agent_id not in self._scope:
            self._scope.add(slot.agent_id)  # the conversation reached another agent: drain it too
        if self._started:
            self._ensure_drain(slot, session)
        if adopted:  # the store watcher already acted on the run with it (a second steer would inject it twice)
            claiming = session.claiming.get(row.id)
            steered = await asyncio.shield(claiming) if claiming is not None else steered_in(session, row.id)
        elif session.run is None:  # the usual send: no run to act on (no coroutine made for it)
            steered = self._steerer.no_run(session, settings.mode)
        else:
            steered = await self._steerer.deliver_to_run(session, queued_message, settings.mode)
        session.idle.clear()
        return SendReceipt(message.id, row.id, False, steered, pushed_out, ticket)  # positional: see the request

    async def send_and_wait(self, message: AgentMessage, timeout_ms: int | None = None) -> SendAndWaitResult:
        """Send, then wait until the turn that consumed the message ends (or ``timeout_ms`` passes)."""
        receipt = await self.send(message)
        if receipt.duplicate:
            return SendAndWaitResult(False, error=f"message {message.id!r} was already accepted earlier")
        lending = self._scheduler.lend()  # asked from a run (a tool): its seat is lent while it waits (._lending)
        if lending is not None and receipt.ticket is not None:
            receipt.ticket.on_settle = partial(self._scheduler.want_back, lending)
        try:
            timeout = None if timeout_ms is None else timeout_ms / 1000
            result = await asyncio.wait_for(receipt.outcome(), timeout)
        except TimeoutError:
            result = SendAndWaitResult(False, error=f"no reply within {timeout_ms} ms (the message stays queued)")
        except BaseException:
            if lending is not None:
                self._scheduler.take_back_now(lending)
            raise
        if lending is not None:
            await self._scheduler.take_back(lending)
        return result

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
        return busiest([*(one.state() for one in found), *slot.beside_states(self._labels(slot, session))])

    async def wait_for_idle(self, agent_id: str, timeout_ms: int | None = None, *, session: str | None = None) -> bool:
        """Wait until the agent (or its session ``session``) has no run and nothing runnable, runs beside its
        queues included (:meth:`run_beside`); ``False`` on timeout."""
        slot = self._slot(agent_id)
        labels = None if session is None else self._labels(slot, session)

        async def settle() -> None:
            while True:
                busy = [s for s in self._sessions(slot, session) if not s.is_idle()]
                beside = slot.beside_busy(labels)
                if not busy and not beside:
                    return
                for one in busy:
                    await one.idle.wait()
                if beside:
                    await asyncio.wait(beside)  # never cancels them (a timeout here must not stop a run)

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
        return all(session.is_idle() for session in slot.all_sessions()) and not slot.beside_busy(None)

    @staticmethod
    def _labels(slot: AgentSlot, session: str) -> set[str]:
        """The labels a run beside the queues in session ``session`` may have: its key's, or ``session`` itself
        (a chat completion's ``X-Nexus-Session`` is a label)."""
        return {session, session_label_for(slot.agent_id, slot.identity.session_label, session)}

    def abort(self, agent_id: str, session: str | None = None, reason: str = "aborted on request") -> bool:
        """Abort the agent's current runs (or its session's); queues keep draining. ``False``: none ran.

        Runs beside the queues (:meth:`run_beside`) are the agent's too: ``session`` names one by its key or
        its label (a chat completion's ``X-Nexus-Session``)."""
        slot = self._slot(agent_id)
        runs = [s.run for s in self._sessions(slot, session) if s.run is not None]
        if slot.beside:
            labels = None if session is None else self._labels(slot, session)
            runs += [run for run in slot.beside if labels is None or run.session_label in labels]
        for run in runs:
            run.abort(reason)
        return bool(runs)

    def run_beside(self, agent_id: str, begin: BeginBeside, *, session: str | None = None) -> Future[Execution | None]:
        """Start a run of the agent outside its queues (``begin(tools)`` starts it with the agent tools a batch's
        run gets, :meth:`BesideRuns.start`: a chat completion in another session), counted against
        ``max_concurrent`` like a batch (it waits for a seat), listed with the agent while it runs
        (:meth:`get_state`, :meth:`abort`), waited for by :meth:`wait_for_idle` and :meth:`wait_until_idle`
        from now until it ended, and aborted by :meth:`close`. ``session``: the label or key of the session it
        will run in, if known: while it waits for a seat, a wait for another session of the agent does not
        wait for it (without it, every session's does).

        The future is the run once started; ``None`` when the broker closed before a seat was free (nothing
        started); ``begin``'s exception if it raised.
        """
        slot = self._slot(agent_id)
        if self._closing:
            done: Future[Execution | None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        return self._beside.start(slot, begin, session)

    def get_queue_depth(self, agent_id: str, session: str | None = None) -> int:
        """Messages waiting for the agent, or in one of its sessions (not counting those runs hold)."""
        return sum(len(s.queue.waiting()) for s in self._sessions(self._slot(agent_id), session))

    async def clear_queue(self, agent_id: str, session: str | None = None) -> int:
        """Drop every waiting message of the agent, or of one session (``dropped``, reason recorded)."""
        slot = self._slot(agent_id)
        removed = [item for s in self._sessions(slot, session) for item in s.queue.clear()]
        cleared = "dropped: the queue was cleared"
        return await drop_and_tell(removed, "cleared by clear_queue", None, self._intake.drop, cleared)

    # ------------------------------------------------------------------ draining

    def _ensure_drain(self, slot: AgentSlot, session: SessionSlot) -> None:
        """Have the scheduler look at the session (it queues, times or idles it; see :mod:`._scheduler`)."""
        if self._scope is not None and slot.agent_id not in self._scope:
            return
        self._scheduler.schedule(slot, session)

    def _step(self, slot: AgentSlot, session: SessionSlot) -> Awaitable[None]:
        """One batch of the session, on a worker: what its queue says is next (nothing if it changed). The batch
        runner's coroutine itself, not one awaiting it: each of its waits resumes one frame less."""
        step = session.queue.next_batch(_now_ms())
        return self._batches.run(slot, session, step) if isinstance(step, Batch) else _nothing()

    async def _adopted(self, slot: AgentSlot, session: SessionSlot) -> None:
        """A message another process queued was loaded into the session (``restored``): drained, and
        an ``interrupt`` or steer acts on the session's run as one sent here does (it used to only wait
        for its turn: ``nexus send --mode interrupt`` beside a server never cut the running turn)."""
        self._ensure_drain(slot, session)
        item = session.queue.restored
        if item is None:  # it has left the queue meanwhile (ran, or was pushed out): nothing to act on
            return
        await self._steerer.deliver_to_run(session, item, item.mode)

    def _agent_tools(self, caller: CallerContext) -> list[AgentTool]:
        """The tools a turn of ``caller`` uses to reach other agents (the runtime applies the tool policy);
        those that do not depend on the caller are built once (a run's tools were ~10 us of every message)."""
        if self._shared_tools is None:
            self._shared_tools = broker_tools(self)
        return [caller_tool(self, caller), *self._shared_tools]

    def _wake_session(self, session_label: str) -> None:
        """A wake-up named a session (its lease was released over waiting work): look at it now."""
        for slot in self._slots.values():
            session = slot.sessions.get(session_label)
            if session is not None:
                self._scheduler.wake(slot, session)

    @staticmethod
    def _forget_if_idle(slot: AgentSlot, session: SessionSlot) -> None:
        """An idle per-sender session is forgotten (its rows are the truth): a bot that talked to
        10,000 people keeps no queue for those who are quiet."""
        if session.key is not None and slot.sessions.get(session.label) is session:
            del slot.sessions[session.label]


async def _nothing() -> None:
    """A step with no batch to run."""


def _default_spec() -> AgentSpec:
    from nexus.engine import AgentSpec

    return AgentSpec()
