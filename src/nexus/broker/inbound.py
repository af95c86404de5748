"""Inbound chat: adapter ``monitor`` events become broker messages, and each reply goes back to its chat.

Whoever hosts the broker (``nexus serve``, ``nexus adapters monitor``) starts an
:class:`InboundRouter`. For every enabled adapter account with ``monitor = true`` it keeps the
account's supervised ``monitor`` process running and, for each validated
:class:`~nexus.adapters.events.NexusEvent`:

- sends a message to the account's ``agent`` in the sender's own session — the session key
  ``dm:<platform>:<sender>`` or ``group:<platform>:<container>[:thread:<id>]`` — so every chat
  has its own history, queue and run;
- derives the message id from the event (``in:<adapter>/<account>:<event_id>``): a redelivered
  event (a monitor restarted, a platform retrying) is recognised by ``send``'s durable dedupe and
  never runs twice, also across restarts of the broker;
- stores the reply target (the same chat and thread, replying to the inbound message) in the
  message's ``metadata.deliver_to``. The broker hands it to the run that consumes the message
  (``RunRequest.deliver_to``), and :meth:`InboundRouter.on_run` streams that run's events to the
  target through the :class:`~nexus.streaming.router.StreamRouter` — natively to a ``stream``
  adapter, in blocks otherwise. A message that was pending when the broker stopped keeps its
  target: its run after the restart is delivered the same way.

An event for an account without ``agent`` (or with an agent that is not registered) is logged
once per account and skipped. A malformed monitor line never reaches this module: the manager
refuses it with the reason and carries on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nexus.adapters.events import NexusEvent, reply_target, session_key
from nexus.adapters.types import DeliveryTarget
from nexus.broker.delivery import stored_reply_target
from nexus.broker.types import AgentMessage, BrokerError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from nexus.adapters.manager import AdapterManager
    from nexus.broker.broker import AgentBroker
    from nexus.broker.delivery import Deliverer
    from nexus.broker.engine_runner import EngineRunHandle, EngineRunner
    from nexus.config import NexusConfig
    from nexus.config._adapters import AdapterConfig
    from nexus.streaming.router import DeliveryReport, StreamRouter

log = logging.getLogger("nexus.inbound")

ReplyDelivery = Callable[["EngineRunHandle", DeliveryTarget], Awaitable[object]]
"""Delivers one run's reply to a chat target (see :class:`InboundRouter`)."""


@dataclass(frozen=True, slots=True)
class InboundRoute:
    """One monitored adapter account and the agent its messages go to (``None``: unrouted)."""

    adapter: str
    account_id: str
    agent: str | None


def inbound_routes(adapters: Mapping[str, AdapterConfig]) -> list[InboundRoute]:
    """Every enabled account with ``monitor = true``, in a stable order."""
    return [
        InboundRoute(name, account_id, account.agent)
        for name, config in sorted(adapters.items())
        for account_id, account in sorted(config.accounts.items())
        if account.enabled and account.monitor
    ]


def inbound_message_id(adapter: str, event: NexusEvent) -> str:
    """The broker message id of an inbound event: the same event always gets the same id."""
    return f"in:{adapter}/{event.account_id}:{event.event_id}"


def event_message(adapter: str, event: NexusEvent, agent: str) -> AgentMessage:
    """The broker message for ``event`` (see the module docstring)."""
    target = reply_target(event, adapter)
    metadata: dict[str, object] = {
        "kind": "inbound",
        "adapter": adapter,
        "event_id": event.event_id,
        "platform": event.platform,
        "sender_id": event.sender_id,
        "deliver_to": target.to_json(),
    }
    if event.sender_name:
        metadata["sender_name"] = event.sender_name
    return AgentMessage(
        id=inbound_message_id(adapter, event),
        from_=f"{event.platform}:{event.sender_id}",
        to=agent,
        content=_content(event),
        timestamp=event.timestamp,
        metadata=metadata,
        session=session_key(event),
    )


def _content(event: NexusEvent) -> str:
    """The text the agent reads: the message, with a line per attachment (what it is, where it is)."""
    lines = [event.content] if event.content.strip() else []
    if event.content_type != "text" and not lines:
        lines.append(f"[{event.content_type}]")
    for attachment in event.attachments:
        where = attachment.path or attachment.url or "not downloaded"
        lines.append(f"[attachment: {attachment.filename} ({attachment.content_type}) at {where}]")
    return "\n".join(lines)


class InboundRouter:
    """Runs the monitors of a broker's host and delivers the replies (see the module docstring)."""

    def __init__(
        self,
        broker: AgentBroker,
        manager: AdapterManager,
        router: StreamRouter,
        *,
        deliver: ReplyDelivery | None = None,
    ) -> None:
        """``deliver(run, target)`` replaces the built-in reply delivery (e.g. one that also records
        each delivery with its turn); it is called from the runner's hook, so it can subscribe to
        the run before its first event."""
        self.broker = broker
        self.manager = manager
        self.router = router
        self._deliver_reply: ReplyDelivery = deliver or self._deliver
        self.accepted = 0
        self.duplicates = 0
        self._monitors: list[asyncio.Task[None]] = []
        self._deliveries: set[asyncio.Future[object]] = set()
        self._warned: set[tuple[str, str, str]] = set()

    def start(self) -> list[InboundRoute]:
        """Start a supervised monitor per route (in the running loop); returns the routes."""
        routes = inbound_routes(self.manager.adapters)
        loop = asyncio.get_running_loop()
        for route in routes:
            task = loop.create_task(self._monitor(route), name=f"inbound:{route.adapter}/{route.account_id}")
            self._monitors.append(task)
        return routes

    async def _monitor(self, route: InboundRoute) -> None:
        events: AsyncIterator[NexusEvent] = self.manager.monitor(route.adapter, route.account_id)
        try:
            async for event in events:
                await self.accept(route, event)
        except Exception as exc:  # a monitor that cannot run (missing credential...): logged, the broker goes on
            log.error("inbound %s/%s stopped: %s", route.adapter, route.account_id, exc)

    async def wait_monitors(self) -> None:
        """Return once every monitor started by :meth:`start` has ended (its restarts used up, or closed)."""
        if self._monitors:
            await asyncio.wait(self._monitors)  # cancelling this wait leaves the monitors running

    async def accept(self, route: InboundRoute, event: NexusEvent) -> bool:
        """Send ``event`` to the route's agent; ``True`` when it was queued now (not a duplicate)."""
        if route.agent is None:
            fix = f"nexus adapters enable {route.adapter}/{route.account_id} --monitor --agent ID"
            self._warn_once(
                route, "no agent", f"has no agent: event {event.event_id} and later ones are skipped (`{fix}`)"
            )
            return False
        try:
            receipt = await self.broker.send(event_message(route.adapter, event, route.agent))
        except BrokerError as exc:  # unknown agent, empty content, a full queue with policy new...
            self._warn_once(route, type(exc).__name__, f"event {event.event_id} not queued: {exc}")
            return False
        except Exception as exc:  # the ledger failing (disk full...): this event is lost, the monitor goes on
            log.error("inbound %s/%s: event %s could not be stored: %s", route.adapter, route.account_id,
                      event.event_id, exc)  # fmt: skip
            return False
        if receipt.duplicate:
            self.duplicates += 1
            log.info("inbound %s: event %s was already accepted", route.adapter, event.event_id)
            return False
        self.accepted += 1
        return True

    def on_run(self, handle: EngineRunHandle) -> None:
        """Runner hook: a run whose messages came from a chat streams its reply back to that chat."""
        target = stored_reply_target(handle)
        if target is None:
            return
        task: asyncio.Future[object] = asyncio.ensure_future(self._deliver_reply(handle, target))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, handle: EngineRunHandle, target: DeliveryTarget) -> DeliveryReport | None:
        from nexus.ledger import new_ulid
        from nexus.streaming.from_engine import stream_events

        queue: asyncio.Queue[object] = asyncio.Queue()
        done = object()
        handle.on_event(queue.put_nowait)  # subscribed as the run is announced: no early event is missed

        async def engine_events() -> AsyncIterator[object]:
            while (event := await queue.get()) is not done:
                yield getattr(event, "event", event)

        async def end_when_the_run_ends() -> None:
            try:
                await handle.result()
            finally:
                queue.put_nowait(done)

        ender = asyncio.get_running_loop().create_task(end_when_the_run_ends())
        first = await queue.get()
        if first is done:  # the run never started (aborted while it waited): it runs again later, nothing to show
            await ender
            return None

        async def all_events() -> AsyncIterator[object]:
            yield getattr(first, "event", first)
            async for event in engine_events():
                yield event

        run_id, label = f"run-{new_ulid()}", handle.request.session_label
        events = stream_events(all_events(), run_id=run_id, session_label=label, target=target)
        try:
            report = await self.router.deliver(target, events, run_id=run_id, session_label=label)
        finally:
            await ender
        if not report.ok:
            log.warning("reply of %s to %s not delivered: %s (the turn is in the ledger)", handle.request.agent_id,
                        target.key, report.error)  # fmt: skip
        return report

    async def wait_delivered(self) -> None:
        """Wait until every reply delivery started so far has ended."""
        while self._deliveries:
            await asyncio.gather(*list(self._deliveries), return_exceptions=True)

    async def close(self) -> None:
        """Stop the monitors, let started deliveries end, stop the adapter processes."""
        for task in self._monitors:
            task.cancel()
        await asyncio.gather(*self._monitors, return_exceptions=True)
        await self.wait_delivered()
        await self.router.close()

    def _warn_once(self, route: InboundRoute, kind: str, text: str) -> None:
        key = (route.adapter, route.account_id, kind)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("inbound %s/%s %s", route.adapter, route.account_id, text)


def attach_inbound(
    config: NexusConfig, broker: AgentBroker, runner: EngineRunner, *, deliver: ReplyDelivery | None = None
) -> InboundRouter | None:
    """An inbound router for the config's adapters (``None``: there are none), hooked to ``runner``.

    Call it before the broker starts, so the runs of inbound messages that were pending are
    delivered too (also when their account is no longer monitored); then
    :meth:`InboundRouter.start` the monitors once the broker runs.
    """
    if not config.adapters:
        return None
    from nexus.adapters.manager import AdapterManager
    from nexus.streaming.router import StreamRouter

    manager = AdapterManager(config.adapters, home=config.home)
    inbound = InboundRouter(broker, manager, StreamRouter(manager), deliver=deliver)
    runner.on_run(inbound.on_run)
    return inbound


def recorded_delivery(deliverer: Deliverer) -> ReplyDelivery:
    """Reply delivery through ``deliverer``: each reply goes out like ``--deliver``'s and is recorded with its turn."""
    from nexus.broker.execution import run_execution

    def deliver(run: EngineRunHandle, target: DeliveryTarget) -> Awaitable[object]:
        return deliverer.start(run_execution(run, target), target)  # subscribed now, from the runner's hook

    return deliver
