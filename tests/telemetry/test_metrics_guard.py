"""``/metrics`` at the edges of its guard, and the recorder's labels (the app in process, through ASGI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from serve_helpers import samples, value

from nexus import telemetry
from nexus.config._server_schema import ServerConfig
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.server._state import ServerState
from nexus.server.app import create_app
from nexus.telemetry.labels import SPAWNED_WORKERS, agent_label

SCRAPE = "scrape-token-abcdef"


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


def _client(ledger: Ledger, tokens: list[str], metrics_tokens: list[str]) -> httpx.AsyncClient:
    app = create_app(ServerState(ledger, BrokerStore(ledger.database)), ServerConfig(tokens=tokens),
                     metrics_tokens=metrics_tokens)  # fmt: skip
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8700")


async def test_a_metrics_token_alone_guards_metrics_and_nothing_else(ledger: Ledger) -> None:
    telemetry.enable_metrics()
    async with _client(ledger, [], [SCRAPE]) as client:
        assert (await client.get("/v1/agents")).status_code == 200  # a loopback server without API tokens
        refused = await client.get("/metrics")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        scraped = await client.get("/metrics", headers={"authorization": f"Bearer {SCRAPE}"})
    assert scraped.status_code == 200 and "nexus_queue_depth" in scraped.text


async def test_without_any_token_metrics_are_as_open_as_the_rest(ledger: Ledger) -> None:
    telemetry.enable_metrics()
    async with _client(ledger, [], []) as client:
        assert (await client.get("/metrics")).status_code == 200


async def test_metrics_off_is_a_404_that_says_how_to_turn_them_on(ledger: Ledger) -> None:
    async with _client(ledger, ["api-token-0123456789"], []) as client:
        answer = await client.get("/metrics", headers={"authorization": "Bearer api-token-0123456789"})
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == "metrics are off in this server: set [telemetry] metrics = true"


def test_spawned_workers_share_one_label_and_named_agents_keep_theirs() -> None:
    recorder = telemetry.enable_metrics()
    for worker in ("worker-01m8fcgtcabgmr1rkhwrbn1t99", "worker-01m8fcgegcaakhf5vkyf7ffs15"):
        recorder.run_started(worker)
        recorder.run_ended(worker, "end_turn", 0.5)
    recorder.run_started("worker-docs")
    assert agent_label("worker-docs") == "worker-docs" and agent_label("coder") == "coder"
    found = samples(recorder.exposition().decode())  # type: ignore[attr-defined]
    assert value(found, "nexus_run_duration_seconds_count", agent=SPAWNED_WORKERS, status="end_turn") == 2
    assert value(found, "nexus_runs_in_flight", agent=SPAWNED_WORKERS) == 0
    assert value(found, "nexus_runs_in_flight", agent="worker-docs") == 1
