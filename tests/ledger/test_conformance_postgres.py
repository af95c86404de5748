"""The ledger conformance suite (``nexus.testing.conformance``) on the PostgreSQL backend, a fresh database each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from nexus.ledger import Ledger
from nexus.testing.conformance import *  # noqa: F403


@pytest.fixture
async def ledger(postgres_url: str) -> AsyncIterator[Ledger]:
    """A fresh, empty PostgreSQL ledger."""
    opened = await Ledger.connect(postgres_url)
    yield opened
    await opened.aclose()


@pytest.fixture
def reopen(postgres_url: str) -> Callable[[], Awaitable[Ledger]]:
    """Another ledger (its own pool of connections) on the same database."""

    async def another() -> Ledger:
        return await Ledger.connect(postgres_url)

    return another
