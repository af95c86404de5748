"""The HTTP API over a real ledger: sessions, tree, fork, export/import, agents, errors, auth, limits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from nexus.config._server_schema import ServerConfig
from nexus.ledger import Ledger, NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.llm.types import AssistantMessage, TextContent, Usage, UserMessage
from nexus.server._state import ServerState
from nexus.server.app import create_app

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "pi-sessions"
NDJSON = {"content-type": "application/x-ndjson"}
if not FIXTURES.exists():
    FIXTURES = Path("/work/shared/fixtures/pi-sessions")


def _reply(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text)], provider="openai", model="gpt-4o-mini")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.create(NewSession("main")))
        for n in range(3):
            run_inline(
                opened.turns.write(
                    TurnWrite(
                        "main",
                        None,
                        query_messages=[UserMessage(f"question {n}")],
                        response_messages=[_reply(f"answer {n}")],
                        usage=Usage(input=10, output=5, total=15),
                        details=TurnDetails(model="gpt-4o-mini", provider="openai"),
                    )
                )
            )
        yield opened


async def client_for(ledger: Ledger, config: ServerConfig | None = None) -> httpx.AsyncClient:
    app = create_app(ServerState(ledger, BrokerStore(ledger.database)), config)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://nexus.test")


@pytest.fixture
async def client(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(ledger) as opened:
        yield opened


async def test_health_and_openapi(client: httpx.AsyncClient) -> None:
    health = await client.get("/v1/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/sessions/{label}/tree" in spec["paths"] and "/v1/agents" in spec["paths"]


async def test_list_show_history(client: httpx.AsyncClient) -> None:
    listed = (await client.get("/v1/sessions")).json()["sessions"]
    assert [s["label"] for s in listed] == ["main"]
    shown = (await client.get("/v1/sessions/main")).json()
    assert shown["turns"] == 3 and shown["head"]["total_tokens"] == 15
    history = (await client.get("/v1/sessions/main/history")).json()["turns"]
    texts = [[m["content"] for m in turn["messages"]] for turn in history]
    assert texts[0][0] == "question 0" and texts[2][1][0]["text"] == "answer 2"


async def test_fork_then_tree_shows_both_branches(client: httpx.AsyncClient, ledger: Ledger) -> None:
    first = (await ledger.turns.path("main"))[0].id
    forked = await client.post("/v1/sessions/main/fork", json={"turn_id": first, "label": "alt"})
    assert forked.status_code == 201 and forked.json()["head_turn_id"] == first
    await ledger.turns.write(
        TurnWrite("alt", None, query_messages=[UserMessage("other way")], response_messages=[_reply("ok")])
    )
    tree = (await client.get("/v1/sessions/main/tree")).json()
    turns = {t["id"]: t for t in tree["turns"]}
    assert len(turns) == 4 and not tree["truncated"]
    alt_head = (await ledger.sessions.get("alt")).thread_id
    assert turns[alt_head]["parent_turn_id"] == first and not turns[alt_head]["on_path"]
    assert turns[alt_head]["heads_of"] == ["alt"]
    turn = (await client.get(f"/v1/turns/{first}")).json()
    assert [m["role"] for m in turn["messages"]] == ["user", "assistant"] and turn["cost"] >= 0


async def test_fork_refuses_a_turn_of_another_history(client: httpx.AsyncClient, ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("other"))
    foreign = await ledger.turns.write(
        TurnWrite("other", None, query_messages=[UserMessage("x")], response_messages=[_reply("y")])
    )
    response = await client.post("/v1/sessions/main/fork", json={"turn_id": foreign})
    assert response.status_code == 404 and "not in the history" in response.json()["error"]["message"]
    taken = await client.post(
        "/v1/sessions/main/fork", json={"turn_id": (await ledger.turns.path("main"))[0].id, "label": "other"}
    )
    assert taken.status_code == 409 and taken.json()["error"]["type"] == "conflict"


async def test_a_fork_without_a_label_is_named_as_the_cli_names_it(client: httpx.AsyncClient, ledger: Ledger) -> None:
    """One rule with ``nexus sessions fork``: ``main-fork-1``, ``-2``…, not ``fork-<ulid>`` (no name to type)."""
    first = (await ledger.turns.path("main"))[0].id
    labels = [(await client.post("/v1/sessions/main/fork", json={"turn_id": first})).json()["label"] for _ in "ab"]
    assert labels == ["main-fork-1", "main-fork-2"]
    assert (await ledger.sessions.get("main-fork-2")).thread_id == first


async def test_export_then_import_round_trip(client: httpx.AsyncClient) -> None:
    exported = await client.get("/v1/sessions/main/export")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-ndjson")
    imported = await client.post(
        "/v1/sessions/import", params={"label": "copy"}, content=exported.content,
        headers={"content-type": "application/x-ndjson"},
    )  # fmt: skip
    assert imported.status_code == 201 and imported.json()["label"] == "copy" and imported.json()["turns"] == 3
    history = (await client.get("/v1/sessions/copy/history")).json()["turns"]
    assert history[2]["messages"][0]["content"] == "question 2"


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="the shared pi session fixtures are not beside this checkout")
async def test_import_a_file_pi_wrote(client: httpx.AsyncClient) -> None:
    sample = sorted(FIXTURES.glob("*.jsonl"))[0]
    response = await client.post("/v1/sessions/import", content=sample.read_bytes(), headers=NDJSON)
    assert response.status_code == 201 and response.json()["turns"] > 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("get", "/v1/sessions/nope", None, 404),
        ("get", "/v1/sessions/nope/history", None, 404),
        ("get", "/v1/turns/01NOTATURN", None, 404),
        ("post", "/v1/sessions/main/fork", {"turn_id": 5}, 422),
        ("post", "/v1/sessions/main/fork", {"turn": "x"}, 422),
        ("post", "/v1/sessions/import", None, 400),
        ("get", "/v1/sessions/..%2F..%2Fetc%2Fpasswd", None, 404),
        ("post", "/v1/agents", {"id": "has space"}, 422),
        ("post", "/v1/agents", {"id": "w", "tools": ["reed"]}, 422),
        ("delete", "/v1/agents/ghost", None, 404),
        ("get", "/v1/nowhere", None, 404),
    ],
)
async def test_bad_requests_get_the_error_shape(
    client: httpx.AsyncClient, method: str, path: str, body: object, status: int
) -> None:
    kwargs = {"json": body} if body is not None else {}
    response = await client.request(method.upper(), path, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"type", "message"} and error["message"]


async def test_malformed_json_is_a_422_and_nothing_changes(client: httpx.AsyncClient, ledger: Ledger) -> None:
    response = await client.post(
        "/v1/sessions/main/fork", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["error"]["type"] == "invalid_request"
    message = response.json()["error"]["message"]
    assert message.startswith("the request body is not valid JSON at character 1"), (
        message
    )  # was "1: JSON decode error"
    assert [s.label for s in await ledger.sessions.list()] == ["main"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"turn_id": "\xff\xfe"}', "not UTF-8"),
        (b"[" * 100_000, "nested"),
        (b'{"turn_id": ' + b"9" * 5000 + b"}", "digits"),
        (b'{"turn_id": "x"', "at character"),
    ],
)
async def test_every_body_that_is_not_json_gets_the_one_documented_422(
    client: httpx.AsyncClient, ledger: Ledger, body: bytes, why: str
) -> None:
    """Invalid UTF-8, nesting past the parser's depth and a 5000-digit number were 400 ``http_error``."""
    response = await client.post("/v1/sessions/main/fork", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request" and error["message"].startswith("the request body is not valid JSON")
    assert why in error["message"], error["message"]
    assert [s.label for s in await ledger.sessions.list()] == ["main"]


@pytest.mark.parametrize("line", [b"[" * 100_000, b'{"type": "session", "id": ' + b"9" * 5000 + b"}"])
async def test_an_import_nested_too_deeply_or_with_a_huge_number_is_a_400_not_a_500(
    client: httpx.AsyncClient, ledger: Ledger, line: bytes
) -> None:
    """``json.loads`` raised RecursionError / ValueError, which the import did not catch: a 500."""
    response = await client.post("/v1/sessions/import", content=line + b"\n", headers=NDJSON)
    assert response.status_code == 400, response.text
    assert "not valid JSON" in response.json()["error"]["message"]
    assert [s.label for s in await ledger.sessions.list()] == ["main"]


async def test_an_unknown_session_is_a_404_in_http_terms(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/sessions/nowhere/history")
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "'nowhere'" in message and "GET /v1/sessions" in message and "Ledger." not in message, message


async def test_a_bad_import_names_the_body_not_a_server_path(client: httpx.AsyncClient, ledger: Ledger) -> None:
    response = await client.post("/v1/sessions/import", content=b'{"type": "message"}\n', headers=NDJSON)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert "nexus-import-" not in message and "/tmp" not in message, message
    assert [s.label for s in await ledger.sessions.list()] == ["main"]


async def test_agents_crud_and_queue(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/agents", json={"id": "coder", "model": "openai/gpt-4o-mini", "tools": ["read"]})
    assert created.status_code == 201 and created.json()["session_label"] == "agent:coder"
    listed = (await client.get("/v1/agents")).json()["agents"]
    assert [(a["id"], a["state"], a["queue_depth"]) for a in listed] == [("coder", "idle", 0)]
    assert (await client.get("/v1/agents/coder/queue")).json() == {"items": []}
    assert (await client.delete("/v1/agents/coder")).status_code == 204
    assert (await client.get("/v1/agents/coder")).status_code == 404


async def test_tokens_are_required_when_configured(ledger: Ledger) -> None:
    async with await client_for(ledger, ServerConfig(tokens=["s3cret"])) as client:
        assert (await client.get("/v1/health")).status_code == 200  # liveness stays open
        missing = await client.get("/v1/sessions")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        wrong = await client.get("/v1/sessions", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = await client.get("/v1/sessions", headers={"authorization": "Bearer s3cret"})
        assert right.status_code == 200


async def test_oversized_bodies_are_refused_before_reading(ledger: Ledger) -> None:
    async with await client_for(ledger, ServerConfig(max_body_bytes=100)) as client:
        big = await client.post("/v1/sessions/import", content=b"x" * 101, headers=NDJSON)
        assert big.status_code == 413 and big.json()["error"]["type"] == "too_large"

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"y" * 20

        streamed = await client.post("/v1/sessions/import", content=chunks(), headers=NDJSON)
        assert streamed.status_code == 413
    assert [s.label for s in await ledger.sessions.list()] == ["main"]


@pytest.mark.parametrize("label", ["../../x", "a/b", "back\\slash", "line\nbreak", "tab\there", " padded"])
async def test_a_label_the_api_could_not_address_again_is_refused(
    client: httpx.AsyncClient, ledger: Ledger, label: str
) -> None:
    """A fork or import named ``a/b`` was created, then no ``/v1/sessions/{label}`` route could reach it."""
    before = {s.label for s in await ledger.sessions.list()}
    turn = (await ledger.turns.path("main"))[0].id
    forked = await client.post("/v1/sessions/main/fork", json={"turn_id": turn, "label": label})
    assert forked.status_code == 422, forked.text
    assert forked.json()["error"]["type"] == "invalid_request" and "label" in forked.json()["error"]["message"]
    imported = await client.post(
        "/v1/sessions/import", params={"label": label}, content=b'{"type":"session"}\n', headers=NDJSON
    )
    assert imported.status_code == 422, imported.text
    assert {s.label for s in await ledger.sessions.list()} == before


async def test_an_agent_cannot_be_registered_with_an_unaddressable_session(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    for label in ("../../x", "a\nb"):
        response = await client.post("/v1/agents", json={"id": "w", "session_label": label})
        assert response.status_code == 422, response.text
        assert "session_label" in response.json()["error"]["message"]
    assert BrokerStore(ledger.database).get_agent("w") is None


async def test_an_import_names_entries_of_a_type_pi_does_not_define(client: httpx.AsyncClient) -> None:
    """A trial's file with a made-up entry type got a plain 201: the answer now counts such entries by type."""
    lines = [
        b'{"type":"session","version":3,"id":"odd-2","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}',
        b'{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}',
        b'{"type":"alien_entry","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","data":1}',
        b'{"type":"label","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","targetId":"a1","label":"x"}',
    ]
    response = await client.post("/v1/sessions/import", content=b"\n".join(lines) + b"\n", headers=NDJSON)
    assert response.status_code == 201, response.text
    assert response.json()["unknown_entries"] == {"alien_entry": 1}


async def test_an_agent_whose_message_another_process_runs_is_running_not_idle(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    # only this process's broker was asked: a server without it (or a nested `nexus mcp serve` asked by
    # the very run) said idle while another process ran the agent
    assert (await client.post("/v1/agents", json={"id": "coder", "model": "openai/gpt-4o-mini"})).status_code == 201
    store = BrokerStore(ledger.database)
    first, _ = store.accept(agent_id="coder", session_label="agent:coder", message_id="m1", sender="user",
                            message={"content": "one"}, mode="followup")  # fmt: skip
    store.accept(agent_id="coder", session_label="agent:coder", message_id="m2", sender="user",
                 message={"content": "two"}, mode="followup")  # fmt: skip

    async def seen() -> list[tuple[str, str, int]]:
        listed = (await client.get("/v1/agents")).json()["agents"]
        one = (await client.get("/v1/agents/coder")).json()
        assert (one["state"], one["queue_depth"]) == (listed[0]["state"], listed[0]["queue_depth"])
        return [(a["id"], a["state"], a["queue_depth"]) for a in listed]

    assert await seen() == [("coder", "idle", 2)]  # waiting only
    store.claim([first.id])  # another process's run takes the first
    assert await seen() == [("coder", "running", 2)]
    store.release([first.id])
    assert await seen() == [("coder", "idle", 2)]


async def test_a_sub_agents_session_with_a_slash_in_its_label_can_be_opened(
    ledger: Ledger, client: httpx.AsyncClient
) -> None:
    """The engine names a sub-agent's session ``<parent>/<label>-<ulid>``; the API listed it, and the web UI
    showed it, but every ``/v1/sessions/{label}/…`` route answered 404 for it (a trial). Both the plain and the
    percent-encoded (``encodeURIComponent``, as the web UI sends it) forms reach it now."""
    label = "main/todo-01M8KQWS8M5VPPJMBC7TKB4CJ0"
    await ledger.sessions.create(NewSession(label, origin="subagent"))
    await ledger.turns.write(TurnWrite(label, None, [UserMessage("say hi")], [_reply("hi from the worker")]))
    for shown in (label, label.replace("/", "%2F")):
        detail = await client.get(f"/v1/sessions/{shown}")
        assert detail.status_code == 200 and detail.json()["label"] == label, detail.text
        history = (await client.get(f"/v1/sessions/{shown}/history")).json()
        assert history["label"] == label and len(history["turns"]) == 1
        tree = (await client.get(f"/v1/sessions/{shown}/tree")).json()
        assert tree["label"] == label and len(tree["turns"]) == 1
        exported = await client.get(f"/v1/sessions/{shown}/export")
        assert exported.status_code == 200 and "hi from the worker" in exported.text
    renamed = await client.patch(f"/v1/sessions/{label}", json={"title": "the worker"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "the worker", renamed.text
    head = (await client.get(f"/v1/sessions/{label}")).json()["head"]["id"]
    forked = await client.post(f"/v1/sessions/{label}/fork", json={"turn_id": head, "label": "worker-copy"})
    assert forked.status_code == 201, forked.text
    assert (await client.get("/v1/sessions/main/history")).json()["label"] == "main", "the others are as before"
    assert (await client.get("/v1/sessions/main/nope")).status_code == 404


async def test_a_404_for_a_huge_label_does_not_echo_it_whole(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/sessions/" + "a" * 20_000)
    message = missing.json()["error"]["message"]
    assert missing.status_code == 404 and len(message) < 400 and "(20000 characters)" in message, message[:300]
