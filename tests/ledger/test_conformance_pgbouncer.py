"""The conformance suite on PostgreSQL through pgbouncer in transaction pooling mode, prepared statements off.

Each transaction may run on another server connection, so the ledger keeps no session state (no session
advisory lock, no ``SET``); a pgbouncer older than 1.21 (Debian 12 ships 1.18) passes no prepared
statements between transactions, hence ``NEXUS_PG_PREPARE=0``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from nexus.ledger import Ledger
from nexus.testing.conformance import *  # noqa: F403


@pytest.fixture
async def ledger(postgres_url: str, pgbouncer_server: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Ledger]:
    """A fresh PostgreSQL ledger reached through pgbouncer."""
    monkeypatch.setenv("NEXUS_PG_PREPARE", "0")
    opened = await Ledger.connect(_bounced(postgres_url, pgbouncer_server))
    yield opened
    await opened.aclose()


def _bounced(postgres_url: str, pgbouncer_server: str) -> str:
    """The test's database, reached through pgbouncer."""
    bouncer = urlsplit(pgbouncer_server)
    return urlunsplit((bouncer.scheme, bouncer.netloc, urlsplit(postgres_url).path, "", ""))


@pytest.fixture
def reopen(postgres_url: str, pgbouncer_server: str) -> Callable[[], Awaitable[Ledger]]:
    """Another ledger on the same database through pgbouncer."""

    async def another() -> Ledger:
        return await Ledger.connect(_bounced(postgres_url, pgbouncer_server))

    return another
