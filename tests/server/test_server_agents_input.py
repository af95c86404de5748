"""``POST /v1/agents`` over the test app: updates keep what the request leaves out; bad input is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.server._state import ServerState
from nexus.server.app import create_app


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


@pytest.fixture
async def client(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServerState(ledger, BrokerStore(ledger.database)))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://nexus.test") as opened:
        yield opened


async def test_an_update_keeps_the_fields_it_leaves_out(client: httpx.AsyncClient) -> None:
    body = {"id": "x", "role": "manager", "model": "openai/gpt-4o-mini", "session_label": "S", "tools": ["read"]}
    assert (await client.post("/v1/agents", json=body)).status_code == 201
    updated = await client.post("/v1/agents", json={"id": "x", "tools": ["bash"]})
    assert updated.status_code == 201
    shown = (await client.get("/v1/agents/x")).json()
    assert (shown["role"], shown["session_label"]) == ("manager", "S")
    assert shown["spec"] == {"model": "openai/gpt-4o-mini", "tools": ["bash"]}
