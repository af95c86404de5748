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


@pytest.mark.parametrize(
    ("model", "expected"),
    [("nope/zzz", "unknown provider 'nope'"), ("local/not-configured", "unknown local model")],
)
async def test_a_model_no_run_could_reach_is_422_and_nothing_is_stored(
    client: httpx.AsyncClient, ledger: Ledger, model: str, expected: str
) -> None:
    refused = await client.post("/v1/agents", json={"id": "w", "model": model})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert (
        error["type"] == "invalid_request" and error["message"].startswith("model: ") and expected in error["message"]
    )
    assert BrokerStore(ledger.database).list_agents() == [] and await ledger.sessions.list() == []


async def test_a_missing_key_is_not_an_error_at_registration(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    made = await client.post("/v1/agents", json={"id": "w", "model": "anthropic/claude-sonnet-4-5"})
    assert made.status_code == 201 and made.json()["spec"] == {"model": "anthropic/claude-sonnet-4-5"}


async def test_a_session_another_agent_talks_in_is_409_naming_it(client: httpx.AsyncClient, ledger: Ledger) -> None:
    assert (await client.post("/v1/agents", json={"id": "a", "session_label": "s"})).status_code == 201
    refused = await client.post("/v1/agents", json={"id": "b", "session_label": "s", "model": "openai/gpt-4o"})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["type"] == "conflict" and error["message"].startswith(
        "session_label: session 's' belongs to agent 'a'"
    )
    assert [row.agent_id for row in BrokerStore(ledger.database).list_agents()] == ["a"]
    taken_by_default = await client.post("/v1/agents", json={"id": "c", "session_label": "agent:a"})
    assert taken_by_default.status_code == 201  # 'agent:a' is nobody's: a talks in 's'


async def test_another_agents_per_sender_facade_or_busy_session_is_409_naming_it(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    store = BrokerStore(ledger.database)
    assert (await client.post("/v1/agents", json={"id": "m"})).status_code == 201
    store.accept(
        agent_id="m", session_label="agent:m", message_id="x1", sender="user", message={"content": "X1"},
        mode="followup",
    )  # fmt: skip
    for label in ("m~s1", "m~fork~route-1", "agent:m:user:bob"):
        refused = await client.post("/v1/agents", json={"id": "squat", "session_label": label})
        assert refused.status_code == 409, label
        assert "belongs to agent 'm'" in refused.json()["error"]["message"]
    moved = await client.post("/v1/agents", json={"id": "m", "session_label": "m-new"})
    assert moved.status_code == 201  # m moves on; its waiting X1 still runs in agent:m
    refused = await client.post("/v1/agents", json={"id": "m2", "session_label": "agent:m"})
    assert refused.status_code == 409
    assert "still has 1 unfinished message(s) of agent 'm'" in refused.json()["error"]["message"]
    assert [row.agent_id for row in store.list_agents()] == ["m"]


async def test_an_update_of_a_busy_agent_answers_its_live_queue(client: httpx.AsyncClient, ledger: Ledger) -> None:
    assert (await client.post("/v1/agents", json={"id": "m"})).status_code == 201
    for n in (1, 2):
        BrokerStore(ledger.database).accept(
            agent_id="m", session_label="agent:m", message_id=f"x{n}", sender="user", message={"content": "X"},
            mode="followup",
        )  # fmt: skip
    updated = await client.post("/v1/agents", json={"id": "m", "session_label": "m-new"})
    assert updated.status_code == 201
    shown = (await client.get("/v1/agents/m")).json()
    assert (updated.json()["state"], updated.json()["queue_depth"]) == (shown["state"], shown["queue_depth"])
    assert shown["queue_depth"] == 2


async def test_delete_refuses_an_agent_with_waiting_messages_until_its_queue_is_cleared(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    store = BrokerStore(ledger.database)
    assert (await client.post("/v1/agents", json={"id": "delme"})).status_code == 201
    items = [
        store.accept(
            agent_id="delme", session_label="agent:delme", message_id=f"d{n}", sender="user",
            message={"content": f"D{n}"}, mode="followup",
        )[0]
        for n in range(3)
    ]  # fmt: skip
    store.claim([items[0].id])  # a run holds D0: it finishes whatever happens to the agent
    refused = await client.delete("/v1/agents/delme")
    assert refused.status_code == 409 and "still has 2 waiting message(s)" in refused.json()["error"]["message"]
    assert (await client.get("/v1/agents/delme/queue")).status_code == 200  # still listed, still clearable
    assert (await client.delete("/v1/agents/delme/queue")).json()["dropped"] == 2
    assert (await client.delete("/v1/agents/delme")).status_code == 204
    assert [item.status for item in store.items(agent_id="delme", statuses=())] == ["processing", "dropped", "dropped"]
