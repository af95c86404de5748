"""The endpoints the web UI needs, over a real ledger: a new chat, a fork an agent can continue,
titles, archive ("delete") and restore, search, each session's agent and channel, what the user
wrote apart from the event context, turn previews, and agent-to-agent messages with their replies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from nexus.ledger import Ledger, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import AcceptRequest, BrokerStore
from nexus.llm.types import AssistantMessage, TextContent, UserMessage
from nexus.server._state import ServerState
from nexus.server.app import create_app

HEADER = "[Event context]\nTime: 2026-01-05T10:00:00+00:00 (UTC)\nChannel: web\n[/Event context]"


def _reply(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text)], provider="openai", model="gpt-4o-mini")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """``agent:coder`` (agent coder's own session) with two turns, the first with an event-context header."""
    with Ledger.open(tmp_path / "agents.db") as opened:
        store = BrokerStore(opened.database)
        store.save_agent("coder", role="worker", session_label="agent:coder", spec={})
        store.save_agent("lead", role="manager", session_label="agent:lead", spec={})
        run_inline(opened.sessions.ensure(NewSession("agent:coder")))
        for text in (f"{HEADER}\n\nfix the tests", "and the docs"):
            run_inline(
                opened.turns.write(
                    TurnWrite("agent:coder", None, query_messages=[UserMessage(text)], response_messages=[_reply("ok")])
                )
            )
        run_inline(opened.sessions.create(NewSession("notes")))  # a `nexus run` session: no agent's
        yield opened


@pytest.fixture
async def client(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServerState(ledger, BrokerStore(ledger.database)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://nexus.test") as opened:
        yield opened


async def test_each_session_says_whose_it_is_where_it_comes_from_and_how_to_reach_it(client: httpx.AsyncClient) -> None:
    sessions = {s["label"]: s for s in (await client.get("/v1/sessions")).json()["sessions"]}
    own, notes = sessions["agent:coder"], sessions["notes"]
    assert (own["agent"], own["channel"], own["session_key"], own["title"]) == ("coder", "agent", None, None)
    assert (notes["agent"], notes["channel"], notes["session_key"]) == (None, "cli", None)


async def test_a_new_chat_is_a_session_of_the_agent_that_its_key_reaches(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    created = await client.post("/v1/sessions", json={"agent": "coder", "title": "Refactor plan"})
    assert created.status_code == 201, created.text
    chat = created.json()
    assert chat["agent"] == "coder" and chat["channel"] == "web" and chat["title"] == "Refactor plan"
    assert chat["session_key"].startswith("web:") and chat["head_turn_id"] is None
    from nexus.broker.sessions import session_label_for

    assert session_label_for("coder", "agent:coder", chat["session_key"]) == chat["label"]
    sent = await client.post("/v1/agents/coder/messages", json={"content": "hi", "session": chat["session_key"]})
    assert sent.status_code == 202
    (item,) = BrokerStore(ledger.database).items(agent_id="coder")
    assert item.session_label == chat["label"], "the message waits in the new chat's queue, not the agent's own"
    unknown = await client.post("/v1/sessions", json={"agent": "ghost"})
    assert unknown.status_code == 422 and "agent: unknown agent 'ghost'" in unknown.json()["error"]["message"]


async def test_a_fork_keeps_its_agent_or_takes_the_one_picked_and_is_continuable(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    """A fork of an agent's session had no agent: the UI could not send to it ("register one")."""
    first = (await ledger.turns.path("agent:coder"))[0].id
    kept = (await client.post("/v1/sessions/agent:coder/fork", json={"turn_id": first, "title": "Try B"})).json()
    assert (kept["agent"], kept["title"], kept["head_turn_id"], kept["origin"]) == ("coder", "Try B", first, "fork")
    assert kept["session_key"] and kept["label"].startswith("coder~web~")
    picked = (await client.post("/v1/sessions/agent:coder/fork", json={"turn_id": first, "agent": "lead"})).json()
    assert picked["agent"] == "lead" and picked["label"].startswith("lead~web~")
    sent = await client.post("/v1/agents/lead/messages", json={"content": "go on", "session": picked["session_key"]})
    assert sent.status_code == 202
    (item,) = BrokerStore(ledger.database).items(agent_id="lead")
    assert item.session_label == picked["label"]
    plain = (await client.post("/v1/sessions/agent:coder/fork", json={"turn_id": first, "label": "mine"})).json()
    assert (plain["label"], plain["agent"]) == ("mine", None), "a labelled fork is no agent's, as before"
    both = await client.post("/v1/sessions/agent:coder/fork", json={"turn_id": first, "label": "x", "agent": "lead"})
    assert both.status_code == 422 and "not both" in both.json()["error"]["message"]


async def test_rename_archive_restore_and_search_never_change_a_label_or_a_turn(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    before = [t.id for t in await ledger.turns.path("agent:coder")]
    renamed = await client.patch("/v1/sessions/agent:coder", json={"title": "Test fixing"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Test fixing"
    found = (await client.get("/v1/sessions", params={"q": "test FIX"})).json()["sessions"]
    assert [s["label"] for s in found] == ["agent:coder"]
    assert [s["label"] for s in (await client.get("/v1/sessions", params={"q": "cli"})).json()["sessions"]] == ["notes"]
    assert (await client.delete("/v1/sessions/notes")).status_code == 204
    listed = [s["label"] for s in (await client.get("/v1/sessions")).json()["sessions"]]
    assert "notes" not in listed and (await ledger.sessions.get("notes")).status == "archived"
    archived = (await client.get("/v1/sessions", params={"include_archived": "true"})).json()["sessions"]
    assert {s["label"]: s["status"] for s in archived}["notes"] == "archived"
    restored = await client.patch("/v1/sessions/notes", json={"archived": False})
    assert restored.json()["status"] == "active"
    cleared = await client.patch("/v1/sessions/agent:coder", json={"title": None})
    assert cleared.json()["title"] is None and [t.id for t in await ledger.turns.path("agent:coder")] == before
    for body in ({"title": "  "}, {"title": "a\x07b"}, {"title": "x" * 201}, {"label": "new"}, {"archived": "yes"}):
        refused = await client.patch("/v1/sessions/agent:coder", json=body)
        assert refused.status_code == 422, body
    assert (await client.patch("/v1/sessions/nope", json={"title": "x"})).status_code == 404
    assert (await client.delete("/v1/sessions/nope")).status_code == 404


async def test_user_messages_carry_what_the_user_wrote_and_the_event_context_apart(client: httpx.AsyncClient) -> None:
    """Every bubble and tree row showed the raw ``[Event context] … [/Event context]`` header."""
    history = (await client.get("/v1/sessions/agent:coder/history")).json()["turns"]
    first = history[0]["messages"][0]
    assert first["text"] == "fix the tests" and first["event_context"] == HEADER
    assert first["content"].startswith("[Event context]"), "the stored message is unchanged"
    second = history[1]["messages"][0]
    assert (second["text"], second["event_context"]) == ("and the docs", None)
    tree = (await client.get("/v1/sessions/agent:coder/tree")).json()["turns"]
    assert [t["preview"] for t in tree] == ["fix the tests", "and the docs"]


async def test_agent_messages_say_who_asked_whom_and_the_reply(client: httpx.AsyncClient, ledger: Ledger) -> None:
    store = BrokerStore(ledger.database)
    await ledger.sessions.ensure(NewSession("agent:lead"))
    ask = AcceptRequest("coder", "agent:coder", "ask-1", "lead", {"content": "run the tests"}, "followup", True)
    (item, _), (user_item, _) = store.accept_many([
        ask, AcceptRequest("coder", "agent:coder", "u-1", "user", {"content": "hi"}, "followup", False),
    ])  # fmt: skip
    store.claim([item.id])
    turn = await ledger.turns.write(
        TurnWrite(
            "agent:coder",
            None,
            query_messages=[UserMessage("run the tests")],
            response_messages=[_reply("12 passed")],
            consumed_queue_items=[item.id],
        )
    )
    messages = (await client.get("/v1/agent-messages")).json()["messages"]
    assert [(m["from"], m["to"], m["content"]) for m in messages] == [("lead", "coder", "run the tests")]
    (message,) = messages
    assert (message["status"], message["turn_id"], message["turn_status"], message["reply"]) == (
        "delivered", turn, "completed", "12 passed",
    )  # fmt: skip
    assert (await client.get("/v1/agent-messages", params={"agent": "lead"})).json()["messages"] == messages
    assert (await client.get("/v1/agent-messages", params={"agent": "nobody"})).json()["messages"] == []
    assert user_item.sender == "user", "a user's message is no agent-to-agent message"


async def test_an_agent_field_given_as_null_goes_back_to_its_default(client: httpx.AsyncClient) -> None:
    """The agent form could not take a model or a tool list back: a left-out field kept its old value."""
    await client.post("/v1/agents", json={"id": "w", "model": "openai/gpt-4o-mini", "tools": ["read"]})
    kept = (await client.post("/v1/agents", json={"id": "w", "system_prompt": "be brief"})).json()
    assert kept["spec"] == {"model": "openai/gpt-4o-mini", "tools": ["read"], "system_prompt": "be brief"}
    reset = (await client.post("/v1/agents", json={"id": "w", "model": None, "tools": None})).json()
    assert reset["spec"] == {"system_prompt": "be brief"}


async def test_the_catalog_lists_tools_modes_and_models(client: httpx.AsyncClient) -> None:
    catalog = (await client.get("/v1/catalog")).json()
    assert "bash" in catalog["tools"] and "interrupt" in catalog["queue_modes"]
    assert "openai/gpt-4o-mini" in catalog["models"]
