"""A span per HTTP request: a caller's ``traceparent`` is continued, a bad one starts a new trace, a refused
request and the liveness probe make none (the app in process, through ASGI, with tracing on)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from span_helpers import recorded_spans

from nexus.config._server_schema import ServerConfig
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.server._state import ServerState
from nexus.server.app import create_app

TOKEN = "api-token-0123456789"
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


async def test_the_callers_trace_is_continued_and_garbage_starts_a_new_one(ledger: Ledger) -> None:
    with recorded_spans() as exporter:
        app = create_app(ServerState(ledger, BrokerStore(ledger.database)), ServerConfig(tokens=[TOKEN]))
        auth = {"authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8700") as c:
            continued = await c.get("/v1/sessions", headers={**auth, "traceparent": CALLER})
            garbage = await c.get("/v1/agents/nobody", headers={**auth, "traceparent": "00-zz-" + "x" * 5000})
            refused = await c.get("/v1/sessions", headers={"traceparent": CALLER})
            health = await c.get("/v1/health", headers={"traceparent": CALLER})
        spans = exporter.get_finished_spans()
    assert (continued.status_code, garbage.status_code, refused.status_code, health.status_code) == (200, 404, 401, 200)
    first, second = spans  # the 401 and the probe made none
    assert first.name == "GET /v1/sessions" and first.kind.name == "SERVER"
    assert first.parent is not None and f"{first.parent.span_id:016x}" == "b7ad6b7169203331"
    assert f"{first.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert second.name == "GET /v1/agents/{agent_id}" and second.parent is None  # a new trace
    assert (second.attributes or {})["http.response.status_code"] == 404
    assert second.status.status_code.name == "UNSET"  # a 4xx is the caller's error, not the server's
