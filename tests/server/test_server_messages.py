"""POST /v1/agents/{id}/messages, /abort, /interrupt and live state, with a live broker on the scripted model."""

from __future__ import annotations

from pathlib import Path

import httpx

from nexus.config._server_schema import ServerConfig
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.server._state import ServerState
from nexus.server.app import create_app
from nexus.testing import ScriptedModel
from nexus.testing.steps import stall, text

from .broker_app import live_app, wait_until


async def test_a_message_is_accepted_202_runs_and_a_retry_is_recognised(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("done")])) as live, live.client() as client:
        sent = await client.post("/v1/agents/coder/messages", json={"content": "fix it", "id": "m-1"})
        assert sent.status_code == 202, sent.text
        body = sent.json()
        assert body["message_id"] == "m-1" and not body["duplicate"]
        await live.broker.wait_for_idle("coder", 20_000)
        again = await client.post("/v1/agents/coder/messages", json={"content": "fix it", "id": "m-1"})
        assert again.status_code == 202 and again.json()["queue_item_id"] == body["queue_item_id"]
        assert again.json()["duplicate"]
        (item,) = live.store.items(agent_id="coder")
        assert item.status == "delivered" and (await live.ledger.turns.get(item.turn_id or "")).status == "completed"
        (shown,) = (await client.get("/v1/agents/coder/queue?include_finished=true")).json()["items"]
        assert (shown["status"], shown["turn_id"], shown["turn_status"], shown["turn_error"]) == (
            "delivered", item.turn_id, "completed", None,
        )  # fmt: skip


async def test_bad_messages_get_the_right_4xx_and_store_nothing(tmp_path: Path) -> None:
    config = ServerConfig(max_body_bytes=10_000)
    async with live_app(tmp_path, ScriptedModel([]), config) as live, live.client() as client:
        cases = [
            ("/v1/agents/coder/messages", {"content": "hi", "mode": "sideways"}, 422),
            ("/v1/agents/nobody/messages", {"content": "hi"}, 404),
            ("/v1/agents/coder/messages", {"content": ""}, 422),
            ("/v1/agents/coder/messages", {"content": "   \n"}, 422),
            ("/v1/agents/coder/messages", {"content": 42}, 422),
            ("/v1/agents/coder/messages", {"content": "hi", "from": "ghost"}, 400),
            ("/v1/agents/coder/messages", {"content": "hi", "from": "coder"}, 400),
            ("/v1/agents/coder/messages", {"content": "hi", "extra": 1}, 422),
            ("/v1/agents/coder/messages", {"content": "x" * 20_000}, 413),
            ("/v1/agents/coder/interrupt", {"content": ""}, 422),
            ("/v1/agents/nobody/interrupt", {"content": "stop"}, 404),
            ("/v1/agents/nobody/abort", None, 404),
        ]
        for path, payload, status in cases:
            response = await client.post(path, json=payload)
            assert response.status_code == status, (path, payload, response.text)
            assert set(response.json()["error"]) == {"type", "message"}
        broken = await client.post(
            "/v1/agents/coder/messages", content=b'{"content": ', headers={"content-type": "application/json"}
        )
        assert broken.status_code == 422 and broken.json()["error"]["type"] == "invalid_request"
        assert live.store.items() == []
        assert (await client.get("/v1/health")).status_code == 200


async def test_abort_stops_the_run_and_the_turn_is_kept_aborted(tmp_path: Path) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30)], chunk_chars=2)
    async with live_app(tmp_path, scripted) as live, live.client() as client:
        await client.post("/v1/agents/coder/messages", json={"content": "long job"})
        await wait_until(lambda: live.broker.get_state("coder") != "idle")
        shown = (await client.get("/v1/agents/coder")).json()
        assert shown["state"] in ("running", "streaming")
        listed = (await client.get("/v1/agents")).json()["agents"]
        assert {a["id"]: a["state"] for a in listed}["coder"] == shown["state"]
        aborted = await client.post("/v1/agents/coder/abort")
        assert aborted.status_code == 200 and aborted.json()["aborted"] is True
        assert await live.broker.wait_for_idle("coder", 20_000)
        (turn,) = await live.ledger.turns.path("agent:coder")
        assert turn.status == "aborted"
        assert (await client.get(f"/v1/turns/{turn.id}")).json()["error"] == "aborted on request"
        (shown,) = (await client.get("/v1/agents/coder/queue?include_finished=true")).json()["items"]
        assert (shown["turn_status"], shown["turn_error"]) == ("aborted", "aborted on request")
        again = await client.post("/v1/agents/coder/abort")
        assert again.json()["aborted"] is False  # nothing runs now


async def test_interrupt_aborts_the_run_then_runs_the_message(tmp_path: Path) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30), text("switched")], chunk_chars=2)
    async with live_app(tmp_path, scripted) as live, live.client() as client:
        await client.post("/v1/agents/coder/messages", json={"content": "long job"})
        await wait_until(lambda: live.broker.get_state("coder") != "idle")
        interrupted = await client.post("/v1/agents/coder/interrupt", json={"content": "do this instead", "id": "i-1"})
        assert interrupted.status_code == 202 and interrupted.json()["message_id"] == "i-1"
        await wait_until(lambda: len(run_inline(live.ledger.turns.path("agent:coder"))) == 2)
        assert await live.broker.wait_for_idle("coder", 20_000)
        first, second = await live.ledger.turns.path("agent:coder")
        assert (first.status, second.status) == ("aborted", "completed")
        why = (await client.get(f"/v1/turns/{first.id}")).json()["error"]
        assert why == "interrupted by message i-1", why  # it was null: the reason was only in the cut reply
        assert "do this instead" in str((await live.ledger.turns.messages(second.id))[0].message.content)


async def test_an_agent_registered_over_http_is_run_by_the_live_broker(tmp_path: Path) -> None:
    scripted = ScriptedModel([text("hello from new")])
    async with live_app(tmp_path, scripted) as live, live.client() as client:
        made = await client.post("/v1/agents", json={"id": "newbie", "model": scripted.model.ref})
        assert made.status_code == 201
        sent = await client.post("/v1/agents/newbie/messages", json={"content": "hi"})
        assert sent.status_code == 202
        assert await live.broker.wait_for_idle("newbie", 20_000)
        assert live.store.get_item(sent.json()["queue_item_id"]).status == "delivered"  # type: ignore[union-attr]


async def test_without_a_broker_messages_are_queued_durably_and_abort_is_refused(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        store.save_agent("coder", role="worker", session_label="agent:coder", spec={})
        app = create_app(ServerState(ledger, store))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            sent = await client.post("/v1/agents/coder/messages", json={"content": "later", "mode": "collect"})
            assert sent.status_code == 202
            (item,) = store.items(agent_id="coder")
            assert (item.id, item.status, item.mode) == (sent.json()["queue_item_id"], "queued", "collect")
            refused = await client.post("/v1/agents/coder/abort")
            assert refused.status_code == 409 and refused.json()["error"]["type"] == "no_broker"
            chat = await client.post(
                "/v1/chat/completions", json={"model": "coder", "messages": [{"role": "user", "content": "hi"}]}
            )
            assert chat.status_code == 409
