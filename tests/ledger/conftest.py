"""Fixtures shared by the ledger's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[BrokerStore]:
    """A broker store on a fresh ledger that has the session ``agent:worker`` (closed after the test)."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:worker")))
        yield BrokerStore(ledger.database)
