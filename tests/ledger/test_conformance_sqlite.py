"""The ledger conformance suite (``nexus.testing.conformance``) on the SQLite backend, in memory and on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.testing.conformance import *  # noqa: F403


@pytest.fixture(params=["sqlite-memory", "sqlite-file"])
async def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledger]:
    """A fresh, empty SQLite ledger."""
    opened = Ledger.open(":memory:" if request.param == "sqlite-memory" else tmp_path / "agents.db")
    yield opened
    opened.close()


@pytest.fixture
def reopen(ledger: Ledger) -> Callable[[], Awaitable[Ledger]]:
    """Another connection to the ledger's database file (an in-memory ledger has none: skipped)."""
    if ledger.path == ":memory:":
        pytest.skip("an in-memory SQLite ledger is private to its connection")

    async def another() -> Ledger:
        return await Ledger.connect(ledger.path)

    return another
