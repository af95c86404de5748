"""``session`` on POST /v1/agents/{id}/messages: a message to one of the agent's per-sender sessions (real uvicorn)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from nexus.broker.sessions import session_label_for
from nexus.ledger._sql_db import run_inline
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

from .broker_app import listening, live_app


async def test_a_message_with_a_session_key_runs_in_that_per_sender_session(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([text("hi 42")])) as live, listening(live.app) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            schema = (await client.get("/openapi.json")).json()
            assert "session" in schema["components"]["schemas"]["MessageRequest"]["properties"]
            sent = await client.post(
                "/v1/agents/coder/messages", json={"content": "hello", "id": "m-1", "session": "dm:telegram:42"}
            )
            assert sent.status_code == 202, sent.text
            assert await live.broker.wait_for_idle("coder", 20_000, session="dm:telegram:42")
        label = session_label_for("coder", "agent:coder", "dm:telegram:42")
        assert label == "coder~dm~telegram~42"  # the same mapping as inbound chat messages
        (item,) = live.store.items(agent_id="coder")
        assert (item.session_label, item.status) == (label, "delivered")
        (turn,) = await live.ledger.turns.path(label)
        assert turn.id == item.turn_id and turn.status == "completed"
        assert await live.ledger.turns.path("agent:coder") == []  # the agent's own session was not touched


async def test_a_bad_session_key_is_422_naming_the_field_and_stores_nothing(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([])) as live, listening(live.app) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            for key in ("", "   ", "a\x01b", "k" * 600, 42):
                response = await client.post("/v1/agents/coder/messages", json={"content": "hi", "session": key})
                assert response.status_code == 422, (key, response.text)
                error = response.json()["error"]
                assert error["type"] == "invalid_request" and "session" in error["message"], error
        assert live.store.items() == []


@pytest.mark.slow  # real processes: nexus serve and nexus send
def test_nexus_send_session_reaches_a_running_server_in_that_session(isolated_env: Path) -> None:
    from nexus.ledger import Ledger
    from nexus.testing import FakeProviderServer
    from nexus.testing.steps import echo

    from .test_serve_process import _nexus, _serving, _stop, _write_config

    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "support").returncode == 0
        with _serving(isolated_env) as (process, _url):
            sent = _nexus(isolated_env, "send", "support", "hi over http", "--session", "dm:telegram:7", "--wait",
                          "--timeout", "30")  # fmt: skip
            assert sent.returncode == 0, sent.stderr
            assert "sent to the running nexus serve" in sent.stderr
            _stop(process)
    label = session_label_for("support", "agent:support", "dm:telegram:7")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        (turn,) = run_inline(ledger.turns.path(label))
        assert turn.status == "completed" and run_inline(ledger.turns.path("agent:support")) == []


async def test_interrupt_with_a_session_key_aborts_only_that_sessions_run(tmp_path: Path) -> None:
    from nexus.testing.steps import stall

    from .broker_app import wait_until

    scripted = ScriptedModel([stall(after_chunks=1, seconds=30), stall(after_chunks=1, seconds=30), text("switched")])
    label = session_label_for("coder", "agent:coder", "dm:telegram:42")
    async with live_app(tmp_path, scripted) as live, live.client() as client:
        schema = (await client.get("/openapi.json")).json()["components"]["schemas"]
        assert "session" in schema["InterruptRequest"]["properties"]
        await client.post("/v1/agents/coder/messages", json={"content": "own long job"})
        await client.post("/v1/agents/coder/messages", json={"content": "chat long job", "session": "dm:telegram:42"})
        await wait_until(lambda: live.broker.get_state("coder", "dm:telegram:42") != "idle")
        await wait_until(lambda: live.broker.get_state("coder", None) != "idle" and len(scripted.calls) == 2)
        for key in ("", "a\x01b"):
            bad = await client.post("/v1/agents/coder/interrupt", json={"content": "x", "session": key})
            assert bad.status_code == 422 and "session" in bad.json()["error"]["message"]
        sent = await client.post(
            "/v1/agents/coder/interrupt", json={"content": "do this instead", "id": "i-1", "session": "dm:telegram:42"}
        )
        assert sent.status_code == 202, sent.text
        assert await live.broker.wait_for_idle("coder", 20_000, session="dm:telegram:42")
        assert [t.status for t in await live.ledger.turns.path(label)] == ["aborted", "completed"]
        assert live.broker.get_state("coder", None) != "idle"  # the agent's own session still runs its job
        assert [t.session_label for t in await live.ledger.turns.open_turns()] == ["agent:coder"]
        item = live.store.get_item(sent.json()["queue_item_id"])
        assert item is not None and item.session_label == label and item.status == "delivered"
        bad = await client.post("/v1/agents/coder/abort", params={"session": "a\x01b"})
        assert bad.status_code == 422 and "session" in bad.json()["error"]["message"]
        idle = await client.post("/v1/agents/coder/abort", params={"session": "dm:telegram:42"})
        assert idle.json() == {"agent_id": "coder", "aborted": False}  # that session runs nothing now
        assert live.broker.get_state("coder", None) != "idle"
        everything = await client.post("/v1/agents/coder/abort")
        assert everything.json()["aborted"] is True and await live.broker.wait_for_idle("coder", 20_000)
