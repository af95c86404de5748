"""A PostgreSQL ledger that goes away: store calls give up after ``NEXUS_DB_WAIT_S`` (not the connection pool's
own 30 s) and say that wait, and ``GET /v1/health`` answers 503 ``ledger: unreachable`` within seconds,
then 200 once the database is back.

Real PostgreSQL behind a TCP gate (``pg_gate``): closing the gate refuses and cuts connections as a stopped
server does, without stopping the cluster the other tests share.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nexus.ledger import Ledger, NewSession, SessionQuery
from nexus.ledger.errors import LedgerBusyError, LedgerUnavailableError

from .live import run_server, wait_until
from .pg_gate import PgGate

pytestmark = pytest.mark.slow  # real PostgreSQL

GIVE_UP_S = 20
"""Far past the waits asked for here, far below the pool's 30 s connect timeout they used to wait."""


@pytest.fixture
def gate(postgres_url: str) -> Iterator[PgGate]:
    with PgGate(postgres_url) as opened:
        yield opened


async def test_a_lost_database_is_given_up_on_after_nexus_db_wait_s_and_the_error_names_it(
    gate: PgGate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXUS_DB_WAIT_S", "1")
    async with await Ledger.connect(gate.url) as ledger:
        await ledger.sessions.create(NewSession("s"))
        gate.down()
        with pytest.raises(LedgerUnavailableError) as raised:
            await asyncio.wait_for(ledger.sessions.list(SessionQuery(limit=1)), GIVE_UP_S)
        said = str(raised.value)
        assert "stayed unreachable for 1 s" in said and "NEXUS_DB_WAIT_S=SECONDS (now 1)" in said, said
        # not the pool's own 30 s timeout (the URL's random database name may hold the digits 30)
        assert not re.search(r"\b30(\.0+)? ?(s|sec|seconds)\b", said), said
        gate.up()
        assert [s.label for s in await _listed_once_back(ledger)] == ["s"]


def test_health_answers_503_within_seconds_while_the_database_is_down_then_200(gate: PgGate) -> None:
    ledger = asyncio.run(Ledger.connect(gate.url))  # NEXUS_DB_WAIT_S left at its 60 s
    try:
        with run_server(ledger) as server:
            assert httpx.get(f"{server.url}/v1/health", timeout=GIVE_UP_S).json()["ledger"] == "ok"
            gate.down()
            for _ in range(3):  # each probe within its own timeout, not only the first
                down = httpx.get(f"{server.url}/v1/health", timeout=GIVE_UP_S)
                assert down.status_code == 503, down.text
                body = down.json()
                assert (body["status"], body["ledger"]) == ("unavailable", "unreachable"), body
                assert gate.url.split("@")[-1].split("/")[0] in body["detail"], body
                assert "NEXUS_DB_WAIT_S" not in body["detail"], body  # health's wait is its own, not that one
                assert down.headers["retry-after"].isdigit()
            gate.up()

            def healthy() -> bool:
                return httpx.get(f"{server.url}/v1/health", timeout=GIVE_UP_S).status_code == 200

            wait_until(healthy, "health to answer 200 once the database is back", timeout=60)
    finally:
        ledger.close()


async def _listed_once_back(ledger: Ledger) -> list[Any]:
    """The sessions, asked until the pool has its connection again (it retries a lost one after a pause)."""
    for _ in range(60):
        try:
            return await asyncio.wait_for(ledger.sessions.list(SessionQuery(limit=1)), GIVE_UP_S)
        except LedgerUnavailableError:
            await asyncio.sleep(0.5)
    raise AssertionError("the ledger did not answer again once the database was back")


async def test_a_write_waiting_behind_another_of_its_process_gives_up_after_nexus_db_wait_s(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One write at a time per process: a write queued behind one that keeps the database (retrying a lost
    server, here a transaction held open) waits NEXUS_DB_WAIT_S in all, not that plus the other's whole wait."""
    monkeypatch.setenv("NEXUS_DB_WAIT_S", "1")
    entered, release = threading.Event(), threading.Event()

    def held(conn: Any) -> int:
        entered.set()
        release.wait(GIVE_UP_S * 2)
        return 1

    async with await Ledger.connect(postgres_url) as ledger:
        database: Any = ledger.database
        first = asyncio.ensure_future(database.run_write(held))
        try:
            assert await asyncio.to_thread(entered.wait, GIVE_UP_S)  # the first write holds the lane
            with pytest.raises(LedgerBusyError) as raised:
                await asyncio.wait_for(database.run_write(lambda conn: 2), GIVE_UP_S)
            assert "another write of this process held it for 1 s" in str(raised.value)
            assert "NEXUS_DB_WAIT_S=SECONDS (now 1)" in str(raised.value)
        finally:
            release.set()
        assert await first == 1
        assert await database.run_write(lambda conn: 3) == 3
