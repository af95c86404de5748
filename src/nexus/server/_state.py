"""What the API's routes share: the ledger, the broker's durable store and the event hub (one per process)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.server._event_hub import EventHub


@dataclass(slots=True)
class ServerState:
    """The process-wide services routes use; built by ``create_app``'s caller.

    ``events`` is the hub the broker publishes ``StreamEvent``s into; when the caller passes none,
    ``create_app`` builds one from ``[server]`` config (the caller then reads it back from here).
    """

    ledger: Ledger
    store: BrokerStore
    events: EventHub | None = None
