"""``deliver`` on ``POST /v1/agents/{id}/messages``: over real HTTP, the reply reaches a real adapter process.

The shipped ``jsonl`` adapter (a subprocess) writes what it receives to a file; the delivery is
then readable with its turn (``GET /v1/turns/{id}``, the history and the tree).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from nexus.adapters.manager import AdapterManager
from nexus.broker import AgentBroker, AgentIdentity, BrokerSettings, QueueSettings
from nexus.config import AdapterConfig, load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.deliveries import DeliveryLog
from nexus.server._state import ServerState
from nexus.server.app import create_app
from nexus.streaming import Deliverer
from nexus.streaming.router import StreamRouter
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

from .broker_app import listening, live_app, wait_until


@asynccontextmanager
async def served(tmp_path: Path, scripted: ScriptedModel, out: Path) -> AsyncIterator[tuple[str, Ledger]]:
    """``nexus serve``'s pieces on a real uvicorn: a broker draining ``coder``, a deliverer for adapter ``files``."""
    adapters = {
        "files": AdapterConfig.model_validate(
            {"builtin": "jsonl", "accounts": {"a": {"config": {"path": str(out)}}, "off": {"enabled": False}}}
        )
    }
    with Ledger.open(tmp_path / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        store = BrokerStore(ledger.database)
        manager = AdapterManager(adapters, state_dir=tmp_path / "adapter-state")
        deliverer = Deliverer(StreamRouter(manager), DeliveryLog(ledger.database), adapters)
        settings = BrokerSettings(queue=QueueSettings(mode="followup"))
        broker = AgentBroker(ledger, env, settings, deliver=deliverer.deliver_stored)
        await broker.start()
        await ledger.sessions.ensure(NewSession("agent:coder"))
        broker.register_agent(AgentIdentity("coder", "agent:coder"), spec=AgentSpec(model=scripted.model.ref))
        state = ServerState(ledger, store, broker=broker, runtime=env, deliverer=deliverer)
        try:
            async with listening(create_app(state)) as url:
                yield url, ledger
        finally:
            await broker.close()
            await deliverer.close()


async def _turn_with_deliveries(client: httpx.AsyncClient, ledger: Ledger, item_id: str) -> dict[str, Any]:
    store = BrokerStore(ledger.database)

    def done() -> bool:
        item = store.get_item(item_id)
        return bool(item and item.turn_id and DeliveryLog(ledger.database).for_turn(item.turn_id))

    await wait_until(done)
    item = store.get_item(item_id)
    assert item is not None
    answer = await client.get(f"/v1/turns/{item.turn_id}")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


async def test_deliver_streams_the_reply_to_the_adapter_and_records_it_with_the_turn(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    scripted = ScriptedModel([text("Delivered over HTTP."), text("Second one.")], chunk_chars=4)
    async with served(tmp_path, scripted, out) as (url, ledger), httpx.AsyncClient(base_url=url) as client:
        target = {"adapter": "files", "account": "a", "to": "chat:7", "thread_id": "t1"}
        sent = await client.post("/v1/agents/coder/messages", json={"content": "hi", "id": "m-1", "deliver": target})
        assert sent.status_code == 202, sent.text
        assert sent.json()["deliver"] == {"channel": "files", "account_id": "a", "to": "chat:7", "thread_id": "t1"}
        turn = await _turn_with_deliveries(client, ledger, sent.json()["queue_item_id"])
        as_text = await client.post(
            "/v1/agents/coder/messages", json={"content": "again", "deliver": "files/a:chat:8"}
        )  # the CLI's NAME/ACCOUNT:TARGET form
        assert as_text.status_code == 202, as_text.text
        second = await _turn_with_deliveries(client, ledger, as_text.json()["queue_item_id"])
        history = (await client.get("/v1/sessions/agent:coder/history")).json()
        tree = (await client.get("/v1/sessions/agent:coder/tree")).json()
        retry = await client.post("/v1/agents/coder/messages", json={"content": "hi", "id": "m-1", "deliver": target})
        assert retry.status_code == 202 and retry.json()["duplicate"] and retry.json()["deliver"] is None
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(w["text"], w["target"]["to"]) for w in written] == [
        ("Delivered over HTTP.", "chat:7"),
        ("Second one.", "chat:8"),
    ]
    (record,) = turn["deliveries"]
    assert record["status"] == "delivered" and record["path"] == "native" and record["attempts"] == 1
    assert record["message_ids"] == [written[0]["message_id"]] and record["target"]["thread_id"] == "t1"
    assert record["adapter"] == "files" and record["account_id"] == "a" and record["turn_id"] == turn["id"]
    assert second["deliveries"][0]["message_ids"] == [written[1]["message_id"]]
    assert [len(t["deliveries"]) for t in history["turns"]] == [1, 1]
    assert [len(t["deliveries"]) for t in tree["turns"]] == [1, 1]


async def test_a_bad_deliver_target_is_a_422_naming_the_field_and_stores_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    async with served(tmp_path, ScriptedModel([]), out) as (url, ledger), httpx.AsyncClient(base_url=url) as client:
        cases: list[tuple[object, str]] = [
            ({"adapter": "nowhere", "account": "a", "to": "x"}, "deliver.adapter: no adapter named 'nowhere'"),
            ({"adapter": "files", "account": "b", "to": "x"}, "deliver.account: adapter 'files' has no account 'b'"),
            ({"adapter": "files", "account": "off", "to": "x"}, "deliver.account: files/off is disabled"),
            ("files-a-x", "expected NAME/ACCOUNT:TARGET"),
            ({"adapter": "files", "account": "a"}, "deliver"),
            ({"adapter": "files", "account": "a", "to": "x", "extra": 1}, "deliver.extra"),
            (5, "deliver: must be an object or a string"),  # not pydantic's "deliver.DeliverTo: …; deliver.str: …"
            ({"adapter": "files", "account": "a"}, "deliver.to: Field required"),
        ]
        for deliver, expected in cases:
            answer = await client.post("/v1/agents/coder/messages", json={"content": "hi", "deliver": deliver})
            assert answer.status_code == 422, (deliver, answer.text)
            error = answer.json()["error"]
            assert error["type"] == "invalid_request" and expected in error["message"], (deliver, error)
            assert "DeliverTo" not in error["message"] and "deliver.str" not in error["message"], error
        schema = (await client.get("/openapi.json")).json()
        assert BrokerStore(ledger.database).items() == []
    deliver_schema = schema["components"]["schemas"]["MessageRequest"]["properties"]["deliver"]
    assert "NAME/ACCOUNT:TARGET" in deliver_schema["description"]
    assert set(schema["components"]["schemas"]["DeliverTo"]["required"]) == {"adapter", "account", "to"}
    assert not out.exists()


async def test_deliver_without_a_broker_in_the_process_is_refused(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        store.save_agent("coder", role="worker", session_label="agent:coder", spec={})
        app = create_app(ServerState(ledger, store))
        async with listening(app) as url, httpx.AsyncClient(base_url=url) as client:
            body = {"content": "hi", "deliver": {"adapter": "files", "account": "a", "to": "x"}}
            answer = await client.post("/v1/agents/coder/messages", json=body)
        assert answer.status_code == 409 and answer.json()["error"]["type"] == "no_broker"
        assert store.items() == []


async def test_deliver_on_a_server_with_no_adapters_names_the_missing_adapter(tmp_path: Path) -> None:
    """``nexus serve`` with no [adapters] said "deliver needs the broker to run in this server process (nexus
    serve)" with a 409: it was nexus serve (a stranger's trial). The adapter is what is missing: 422 naming it."""
    async with live_app(tmp_path, ScriptedModel([])) as live, live.client() as client:
        for deliver in ("tg/main:chat:1", {"adapter": "tg", "account": "main", "to": "chat:1"}):
            answer = await client.post("/v1/agents/coder/messages", json={"content": "hi", "deliver": deliver})
            assert answer.status_code == 422, answer.text
            error = answer.json()["error"]
            assert error["type"] == "invalid_request" and "no adapter named 'tg'" in error["message"], error
        assert live.store.items(agent_id="coder") == []
