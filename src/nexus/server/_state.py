"""What the API's routes share: the ledger, the broker's durable store, the event hub and the live broker."""

from __future__ import annotations

import asyncio
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Protocol

from nexus.ledger import BrokerStore, Ledger
from nexus.server._event_hub import EventHub

if TYPE_CHECKING:
    from nexus.broker import AgentBroker
    from nexus.engine import Runtime
    from nexus.server._event_relay import EventRelay
    from nexus.streaming import Deliverer


class Closable(Protocol):
    """A service the server closes at shutdown (``/mcp``'s ``McpEndpoint``, which itself holds the state)."""

    async def close(self) -> None: ...


@dataclass(slots=True)
class ServerState:
    """The process-wide services routes use; built by ``create_app``'s caller.

    ``events`` is the hub the broker publishes ``StreamEvent``s into; when the caller passes none,
    ``create_app`` builds one from ``[server]`` config (the caller then reads it back from here).
    ``broker`` and ``runtime`` are set when the broker drains in this process (``nexus serve``):
    then messages go through it (steering, interrupts, live state) and the OpenAI facade can run
    turns. Without them the API still accepts messages durably for whichever process drains.
    ``deliverer`` (with the broker) sends replies to adapter targets (``deliver`` on a message).
    """

    ledger: Ledger
    store: BrokerStore
    _: KW_ONLY
    events: EventHub | None = None
    broker: AgentBroker | None = None
    runtime: Runtime | None = None
    deliverer: Deliverer | None = None
    """Delivers replies to chat adapters (``deliver`` on messages) and records them; set with the broker."""
    relay: EventRelay | None = None
    """On a PostgreSQL ledger: runs publish through the shared ``run_events`` log, streams resume from it."""
    mcp: Closable | None = None
    """``/mcp`` (the MCP face over streamable HTTP), set by ``create_app``; closed at shutdown."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when ``nexus serve`` begins to stop: a turn that ends ``aborted`` from now on was cut by the stop."""
    runs_stopped: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the stop has aborted every run: a message no run took by then stays queued for the next start."""
