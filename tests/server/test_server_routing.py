"""Smart routing over HTTP: POST /v1/route and route on the messages endpoint, on a live broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.broker.smart import SmartRouting
from nexus.routing import Router
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

from .broker_app import live_app

PAST = ["Add rate limiting to the login endpoint", "Shrink the API docker image",
        "Generate a PDF invoice when an order is paid", "Make product search tolerate typos"]  # fmt: skip


async def test_route_and_a_routed_message(tmp_path: Path) -> None:
    scripted = ScriptedModel([*(text(f"done: {p}") for p in PAST), text("429 body added"), text("started")])
    async with live_app(tmp_path, scripted) as live, live.client() as client:
        live.broker.use_router(SmartRouting(lambda: Router(live.ledger)))
        for i, content in enumerate(PAST):
            sent = await client.post("/v1/agents/coder/messages", json={"content": content, "session": f"task:{i}"})
            assert sent.status_code == 202
            await live.broker.wait_for_idle("coder", 20_000)
        decided = await client.post("/v1/route", json={"task": "the login rate limiter should answer 429 with JSON"})
        assert decided.status_code == 200, decided.text
        body = decided.json()
        assert body["mode"] == "existing" and body["checkpoint"]["session_key"] == "coder~task~0"
        assert body["decision_id"] and body["scores"][0]["turn_id"] == body["checkpoint"]["turn_id"]

        routed = await client.post("/v1/agents/coder/messages",
                                   json={"content": "the login rate limiter should answer 429 with JSON", "id": "r-1",
                                         "route": "smart"})  # fmt: skip
        assert routed.status_code == 202, routed.text
        route = routed.json()["route"]
        assert (route["mode"], route["arm"], route["agent"], route["session"]) == (
            "smart",
            "smart",
            "coder",
            "fork:r-1",
        )
        await live.broker.wait_for_idle("coder", 20_000)
        turns = await live.ledger.turns.path("coder~fork~r-1")
        assert turns[-1].status == "completed" and turns[-2].id == body["checkpoint"]["turn_id"]

        haiku = {"content": "compose a haiku about autumn leaves", "id": "r-2", "route": "smart",
                 "conversation_id": "poems"}  # fmt: skip
        new = await client.post("/v1/agents/coder/messages", json=haiku)
        assert new.json()["route"]["session"] == "new:r-2" and new.json()["route"]["decision"]["mode"] == "new"
        (recorded,) = [d for d in live.broker.routing.router.decisions.decisions() if d.message_id == "r-2"]
        assert recorded.conversation_id == "poems"  # the A/B arm is the conversation's
        await live.broker.wait_for_idle("coder", 20_000)


async def test_bad_routing_requests_are_4xx_and_store_nothing(tmp_path: Path) -> None:
    async with live_app(tmp_path, ScriptedModel([])) as live, live.client() as client:
        live.broker.use_router(SmartRouting(lambda: Router(live.ledger)))
        empty = await client.post("/v1/route", json={"task": ""})
        assert empty.status_code == 422
        blank = await client.post("/v1/route", json={"task": "   "})  # as empty: 422 (it was 400 "bad_request")
        assert blank.status_code == 422 and blank.json()["error"]["type"] == "invalid_request", blank.text
        unknown = await client.post("/v1/route", json={"task": "fix it", "agent": "nobody"})
        assert unknown.status_code == 404 and "unknown agent 'nobody'" in unknown.text  # as every unknown agent
        assert unknown.json()["error"]["type"] == "not_found"
        nul = await client.post("/v1/route", json={"task": "\u0000 \u0000"})  # a NUL reads as white space
        assert nul.status_code == 400 and nul.json()["error"]["type"] == "invalid_request", nul.text
        assert "nexus route" not in nul.text + blank.text  # an HTTP client is not told to run the CLI
        for body in ({"content": "\u0000"}, {"content": "x", "id": "a\u0000b"}, {"content": "x", "id": "a\nb"}):
            refused = await client.post("/v1/agents/coder/messages", json=body)  # an id: no PostgreSQL text holds it
            assert refused.status_code == 422 and refused.json()["error"]["type"] == "invalid_request", refused.text
        bad_mode = await client.post("/v1/agents/coder/messages", json={"content": "x", "route": "clever"})
        assert bad_mode.status_code == 422
        lone_surrogate = {
            "/v1/route": '{"task": "login \\udcff limiter"}',
            "/v1/agents/coder/messages": '{"content": "login \\udcff limiter", "route": "smart"}',
        }  # JSON's escape of a byte that is not UTF-8
        for path, body in lone_surrogate.items():
            answer = await client.post(path, content=body, headers={"content-type": "application/json"})
            assert answer.status_code == 422 and "unicode string" in answer.text, answer.text
        assert live.broker.routing.router.decisions.decisions() == []
        assert live.store.items(agent_id="coder") == []


async def test_without_a_broker_routing_is_409_no_broker(tmp_path: Path) -> None:
    import httpx

    from nexus.ledger import Ledger
    from nexus.ledger.broker_store import BrokerStore
    from nexus.server._state import ServerState
    from nexus.server.app import create_app

    with Ledger.open(tmp_path / "agents.db") as ledger:
        app = create_app(ServerState(ledger, BrokerStore(ledger.database)))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            answer = await client.post("/v1/route", json={"task": "fix it"})
    assert answer.status_code == 409 and answer.json()["error"]["type"] == "no_broker"


async def test_a_routing_setup_the_server_cannot_use_is_500_not_the_clients_400(tmp_path: Path) -> None:
    # a [routing] model file that is not one was answered 400 invalid_request: "your request is wrong"
    from nexus.routing import RouteSettings

    missing = tmp_path / "no-model.json"
    async with live_app(tmp_path, ScriptedModel([])) as live, live.client() as client:
        live.broker.use_router(SmartRouting(lambda: Router(live.ledger, RouteSettings(model_path=str(missing)))))
        decided = await client.post("/v1/route", json={"task": "fix the login test"})
        assert decided.status_code == 500, decided.text
        error = decided.json()["error"]
        assert error["type"] == "internal_error" and "[routing] model" in error["message"]
        routed = await client.post(
            "/v1/agents/coder/messages", json={"content": "fix it", "id": "r-9", "route": "smart"}
        )
        assert routed.status_code == 500 and routed.json()["error"]["type"] == "internal_error", routed.text
        assert [item for item in live.store.items() if item.message_id == "r-9"] == []  # nothing stored


async def test_a_statement_the_database_refused_is_500_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a bare LedgerError was answered 400 invalid_request: the trial's PostgreSQL NUL fault reached clients so
    from nexus.ledger import LedgerRefusedError

    reason = "the ledger database postgresql://h/db refused a statement: relation sessions does not exist"

    async def refused(*_: object, **__: object) -> object:
        raise LedgerRefusedError(reason)

    async with live_app(tmp_path, ScriptedModel([])) as live, live.client() as client:
        monkeypatch.setattr(live.ledger.sessions, "list", refused)
        answer = await client.get("/v1/sessions")
    assert answer.status_code == 500, answer.text
    assert answer.json()["error"] == {"type": "internal_error", "message": reason}


async def test_a_nul_in_a_task_or_a_routed_message_reads_as_white_space(tmp_path: Path) -> None:
    # a task holding a NUL was refused with 400, and a message holding one with 422, though the
    # chat-completions door and inbound events took it: the doors now agree (the index reads it as a space)
    scripted = ScriptedModel([*(text(f"done: {p}") for p in PAST), text("429 body added")])
    async with live_app(tmp_path, scripted) as live, live.client() as client:
        live.broker.use_router(SmartRouting(lambda: Router(live.ledger)))
        for i, content in enumerate(PAST):
            assert (
                await client.post("/v1/agents/coder/messages", json={"content": content, "session": f"t:{i}"})
            ).is_success
            await live.broker.wait_for_idle("coder", 20_000)
        decided = await client.post("/v1/route", json={"task": "the login\u0000rate limiter should answer 429"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["checkpoint"]["session_key"] == "coder~t~0"
        smart = {"content": "the login\u0000rate limiter should answer 429", "id": "nul-1", "route": "smart"}
        routed = await client.post("/v1/agents/coder/messages", json=smart)
        assert routed.status_code == 202, routed.text
        assert routed.json()["route"]["session"] == "fork:nul-1"
        await live.broker.wait_for_idle("coder", 20_000)
        (recorded,) = [d for d in live.broker.routing.router.decisions.decisions() if d.message_id == "nul-1"]
        assert recorded.task == "the login rate limiter should answer 429"
        turns = await live.ledger.turns.path("coder~fork~nul-1")
        assert turns[-1].status == "completed"
