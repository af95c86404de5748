"""Smart routing in the broker (seed 003 §7, DESIGN §4.6): ``route_smart``, ``fork_from``, routing modes, A/B.

Routing never opens a second way into a session: it decides *where* a message goes and then sends it
through the normal durable, idempotent queue (:meth:`AgentBroker.send`).

- ``route_smart(task)`` asks the :class:`~nexus.routing.Router` (on a worker thread) and records the decision.
- ``fork_from(checkpoint, message)`` makes a ledger fork at the checkpoint's turn (nothing copied) as a
  per-conversation session of the agent that owned it — key ``fork:<message id>``, so a retried call
  reuses the fork instead of making a second — and sends the message there.
- ``send_routed(message, route=...)`` applies a routing mode to one message: ``explicit`` sends it as
  addressed; ``smart`` forks from the best checkpoint, or starts a new conversation (key
  ``new:<message id>``) when nothing clears the threshold; ``hybrid`` forks when the confidence clears
  the threshold and otherwise sends as addressed. With ``smart_share`` < 1 a conversation is in the
  ``explicit`` arm by a hash of its id (A/B), whatever the mode. Every routed message leaves a decision
  row (its arm, and what happened) that ``nexus route stats`` compares.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING

from nexus._dataclass import dataclass
from nexus.broker.types import AgentMessage, BrokerError, SendReceipt
from nexus.routing import ROUTING_MODES, Checkpoint, RoutingError, SmartRouteResult

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.engine import Execution, Runtime
    from nexus.ledger import Ledger
    from nexus.routing import Router

FORK_KEY = "fork:"
NEW_KEY = "new:"


@dataclass(slots=True)
class RoutedSend:
    """What ``send_routed`` did: the receipt of the send, the message as sent, the arm and the decision."""

    receipt: SendReceipt
    message: AgentMessage
    mode: str
    arm: str
    decision: SmartRouteResult | None = None
    notes: list[str] = field(default_factory=list)


class SmartRouting:
    """The router a broker uses (built on first use: it loads the embedder and the index) and the routing
    modes in force, global and per agent."""

    def __init__(
        self,
        router: Router | Callable[[], Router],
        *,
        mode: str = "explicit",
        smart_share: float = 1.0,
        agents: dict[str, str] | None = None,
    ) -> None:
        self._router = router if not callable(router) else None
        self._make = router if callable(router) else None
        self._lock = threading.Lock()
        self.smart_share = smart_share
        self._mode = _checked_mode(mode)
        self._agents = {agent: _checked_mode(m) for agent, m in (agents or {}).items()}

    @classmethod
    def from_config(cls, config: NexusConfig, ledger: Ledger) -> SmartRouting:
        """``[routing]`` of ``config`` on ``ledger`` (the router itself is built when first used)."""
        from nexus.routing import Router, RouteSettings

        r = config.routing
        settings = RouteSettings(
            r.embedder, r.embedding_base_url, r.embedding_model, r.embedding_api_key_env, r.threshold, r.max_task_chars,
            model_path=str(config.routing_model_path or ""),
        )  # fmt: skip
        return cls(lambda: Router(ledger, settings), mode=r.mode, smart_share=r.smart_share, agents=dict(r.agents))

    @property
    def router(self) -> Router:
        """The router (built now if it was not yet: blocking; the broker's calls reach it from a thread)."""
        with self._lock:
            if self._router is None:
                assert self._make is not None
                try:
                    self._router = self._make()
                except ImportError as exc:
                    raise RoutingError(
                        f"smart routing needs numpy ({exc}); pip install 'nexus-broker[routing]'"
                    ) from exc
            return self._router

    def close(self) -> None:
        with self._lock:
            if self._router is not None:
                self._router.close()

    def set_mode(self, mode: str, agent: str | None = None) -> None:
        if agent is None:
            self._mode = _checked_mode(mode)
        else:
            self._agents[agent] = _checked_mode(mode)

    def mode_for(self, agent: str | None) -> str:
        return self._agents.get(agent, self._mode) if agent is not None else self._mode


def _checked_mode(mode: str) -> str:
    if mode not in ROUTING_MODES:
        raise RoutingError(f"routing mode {mode!r} is not one of {', '.join(ROUTING_MODES)}")
    return mode


class SmartRoutingFace:
    """The routing calls of :class:`~nexus.broker.AgentBroker` (it inherits them; they use its public calls)."""

    _smart: SmartRouting | None = None

    if TYPE_CHECKING:  # AgentBroker's

        async def send(self, message: AgentMessage, queue_mode: str | None = None) -> SendReceipt: ...

        def session_label(self, agent_id: str, session: str | None = None) -> str: ...

    def use_router(self, routing: SmartRouting | None) -> None:
        """Give the broker its smart routing (``nexus.broker.host`` does it when ``[routing]`` is configured)."""
        self._smart = routing

    @property
    def routing(self) -> SmartRouting:
        if self._smart is None:
            raise RoutingError(
                "smart routing is not set up for this broker; pip install 'nexus-broker[routing]' "
                "and call broker.use_router(SmartRouting(Router(ledger)))"
            )
        return self._smart

    def set_routing_mode(self, mode: str, agent: str | None = None) -> None:
        """``explicit``, ``smart`` or ``hybrid``, for one agent or (``agent=None``) for all."""
        self.routing.set_mode(mode, agent)

    async def route_smart(self, task: str, *, agent: str | None = None, limit: int = 5) -> SmartRouteResult:
        """Where ``task`` belongs in past work (decided off the event loop and recorded in the ledger)."""
        routing = self.routing
        return await asyncio.to_thread(lambda: routing.router.route(task, agent=agent, limit=limit))

    async def fork_from(self, checkpoint: Checkpoint, message: AgentMessage) -> SendReceipt:
        """Fork the ledger at ``checkpoint`` and send ``message`` there, to the agent that owned its session."""
        routing = self.routing
        forked = await asyncio.to_thread(
            lambda: fork_message(routing.router.ledger, checkpoint, message, self.session_label)
        )
        return await self.send(forked)

    async def send_routed(
        self, message: AgentMessage, queue_mode: str | None = None, *, route: str | None = None
    ) -> RoutedSend:
        """Send ``message`` under a routing mode (``route``, else the mode set for its agent), recording the decision
        (see :func:`plan_route`)."""
        routing = self.routing
        plan = await asyncio.to_thread(lambda: plan_route(routing, message, route, self.session_label))
        receipt = await self.send(plan.message, queue_mode)
        return dataclasses.replace(plan, receipt=receipt)

    async def close_routing(self) -> None:
        """Stop the index worker and close the router's connection (when it was built)."""
        if self._smart is not None:
            await asyncio.to_thread(self._smart.close)


async def index_after_runs(runtime: Runtime, routing: SmartRouting) -> Router:
    """Index every turn soon after it is written: start the router's worker thread (building the router off the
    loop) and wake it as each run of ``runtime`` ends (``Runtime.on_start``, chained to the listener already
    there). Waking is a ``threading.Event.set()``; the indexing runs on the worker, never on the event loop.
    ``nexus serve`` does this under ``[routing] index = true``."""
    router = await asyncio.to_thread(lambda: routing.router)
    router.start()
    before = runtime.on_start

    def on_start(execution: Execution) -> None:
        if before is not None:
            before(execution)
        execution.result.add_done_callback(lambda _: router.notify())

    runtime.on_start = on_start
    return router


LabelOf = Callable[[str, "str | None"], str]
"""``(agent, session key) -> ledger label``: :meth:`AgentBroker.session_label`, or the same from the registry."""


def fork_message(ledger: Ledger, checkpoint: Checkpoint, message: AgentMessage, label_of: LabelOf) -> AgentMessage:
    """Make the fork session of ``checkpoint`` for ``message`` (once) and return the message addressed to it.

    The session is a ledger fork at the checkpoint's turn, keyed ``fork:<message id>`` among the
    conversations of the agent that owned the checkpoint's session (or ``message.to`` when the ledger
    does not say): a retried call with the same message finds the fork it made."""
    agent = checkpoint.agent_id or message.to
    if not agent:
        raise BrokerError(f"checkpoint {checkpoint.turn_id} belongs to no agent; address the message to one")
    key = FORK_KEY + message.id
    label = label_of(agent, key)
    metadata: dict[str, object] = {"agent": agent, "forked_from": checkpoint.turn_id}
    from nexus.ledger import NewSession, SessionExistsError

    fork = NewSession(label, origin="fork", head_turn_id=checkpoint.turn_id, routing_key=key, metadata=metadata)
    try:
        ledger.run_here(lambda here: here.sessions.create(fork))
    except SessionExistsError:
        if ledger.run_here(lambda here: here.sessions.get(label)).routing_key != key:
            raise BrokerError(f"session {label!r} exists and is not the fork of {key!r}; rename that session") from None
    return dataclasses.replace(message, to=agent, session=key)


def plan_route(routing: SmartRouting, message: AgentMessage, route: str | None, label_of: LabelOf) -> RoutedSend:
    """Where a message sent under a routing mode goes, with the decision recorded (blocking: run it in a thread).

    ``explicit`` (or the explicit arm of the A/B split): as addressed. ``smart``: a fork at the best checkpoint
    when the confidence clears the threshold, else a new conversation of ``message.to`` (key ``new:<id>``).
    ``hybrid``: the fork, else as addressed. Routing looks at ``message.to``'s past work only; an empty ``to``
    looks at every agent's, never a session no agent owns (and a task that fits nowhere is then refused: nothing
    to start it with).
    The returned plan's ``receipt`` is a placeholder until the message is sent."""
    mode = _checked_mode(route) if route is not None else routing.mode_for(message.to or None)
    from nexus.routing import arm_for

    conversation = message.conversation_id or message.session or message.id
    arm = "explicit" if mode == "explicit" else arm_for(conversation, routing.smart_share)
    first = _sent_before(routing, message)
    if first is not None:  # a retry: it goes where the first send went, and the A/B stats count it once
        return RoutedSend(
            _PENDING, first, mode, arm, None, [f"message {message.id!r} was sent before: not routed again"]
        )
    if arm == "explicit":
        if not message.to:
            raise BrokerError(f"conversation {conversation!r} is routed explicitly; name the agent to send it to")
        _record_explicit(routing, message, mode, conversation, label_of(message.to, message.session))
        return RoutedSend(_PENDING, message, mode, arm)
    router = routing.router
    decision = router.route(
        message.content,
        agent=message.to or None,
        routing_mode=mode,
        arm=arm,
        conversation_id=conversation,
        agents_only=True,  # without `to`, the checkpoint's agent continues it: sessions no agent owns cannot
    )
    if decision.mode == "existing" and decision.checkpoint is not None:
        chosen = fork_message(router.ledger, decision.checkpoint, message, label_of)
    elif not message.to:
        raise BrokerError("no past work fits this task well enough to continue it; name the agent to start it with")
    elif mode == "smart":  # nothing fits: a conversation of its own
        chosen = dataclasses.replace(message, session=NEW_KEY + message.id)
    else:  # hybrid: the explicit target
        chosen = message
    if decision.decision_id is not None:
        router.decisions.attach(decision.decision_id, label_of(chosen.to, chosen.session), chosen.id)
    return RoutedSend(_PENDING, chosen, mode, arm, decision, list(decision.notes))


_PENDING = SendReceipt("", "")


def _sent_before(routing: SmartRouting, message: AgentMessage) -> AgentMessage | None:
    """``message`` addressed as its id's first accepted send was, or ``None`` (not sent yet).

    A client's retry with the same id was routed again: each retry recorded another decision (``nexus route
    stats`` counted one message several times, even in the explicit arm that never handled it)."""
    from nexus.ledger import BrokerStore

    item = BrokerStore(routing.router.ledger.database).accepted(message.id)
    if item is None:
        return None
    stored = item.message if isinstance(item.message, dict) else {}
    return dataclasses.replace(message, to=item.agent_id or message.to, session=stored.get("session"))


def _record_explicit(routing: SmartRouting, message: AgentMessage, mode: str, conversation: str, label: str) -> None:
    import time

    from nexus.ledger import new_ulid
    from nexus.routing import DecisionRecord

    record = DecisionRecord(
        new_ulid(),
        int(time.time() * 1000),
        message.content[:4000],
        message.to,
        conversation,
        mode,
        "explicit",
        "explicit",
        None,
        0.0,
        session_label=label,
        message_id=message.id,
    )
    routing.router.decisions.record(record)
