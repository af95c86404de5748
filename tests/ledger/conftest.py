"""Fixtures shared by the ledger's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[BrokerStore]:
    """A broker store on a fresh ledger that has the session ``agent:worker`` (closed after the test)."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ledger.ensure_session("agent:worker")
        yield BrokerStore(ledger.database)
