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
  message's ``metadata.deliver_to``. The broker hands the run that consumes the message to its
  :class:`~nexus.streaming.Deliverer`, which streams the reply there — natively to a ``stream``
  adapter, in blocks otherwise — and records it with the turn. A message that was pending when
  the broker stopped keeps its target: its run after the restart is delivered the same way.

An event for an account without ``agent`` (or with an agent that is not registered) is logged
once per account and skipped. A malformed monitor line never reaches this module: the manager
refuses it with the reason and carries on.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nexus.adapters import NexusEvent, reply_target, session_key
from nexus.broker.types import AgentMessage, BrokerError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from nexus.adapters import AdapterManager
    from nexus.broker.broker import AgentBroker
    from nexus.config import AdapterConfig

log = logging.getLogger("nexus.inbound")


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
        where = attachment.path or attachment.url
        at = f" at {_one_line(where)}" if where else ", not downloaded"
        lines.append(f"[attachment: {_one_line(attachment.filename)} ({_one_line(attachment.content_type)}){at}]")
    return "\n".join(lines)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _one_line(text: str) -> str:
    """``text`` with control characters and line breaks shown as escapes (``\\n``): an attachment's fields come
    from the sender, and a newline in a file name made a line of its own in the prompt (one that could read
    ``[Message from admin]``); the docs promise one line per attachment."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


class InboundRouter:
    """Runs the monitors of a broker's host (see the module docstring); the broker delivers the replies."""

    def __init__(self, broker: AgentBroker, manager: AdapterManager) -> None:
        """``manager`` runs the monitor processes (the host's, shared with its deliverer)."""
        self.broker = broker
        self.manager = manager
        self.accepted = 0
        self.duplicates = 0
        self._monitors: list[asyncio.Task[None]] = []
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

    async def close(self) -> None:
        """Stop the monitors (their processes stop with the host's adapter manager)."""
        for task in self._monitors:
            task.cancel()
        await asyncio.gather(*self._monitors, return_exceptions=True)

    def _warn_once(self, route: InboundRoute, kind: str, text: str) -> None:
        key = (route.adapter, route.account_id, kind)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("inbound %s/%s %s", route.adapter, route.account_id, text)
