"""What the API's routes share: the ledger and the broker's durable store (one per process)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore


@dataclass(slots=True)
class ServerState:
    """The process-wide services routes use; built by ``create_app``'s caller."""

    ledger: Ledger
    store: BrokerStore
