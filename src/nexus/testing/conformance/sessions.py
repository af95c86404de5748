"""The session surface: create, get, list with filters, aliases and their errors."""

from __future__ import annotations

import pytest

from nexus.ledger import (
    Ledger,
    NewSession,
    SessionExistsError,
    SessionNotFound,
    SessionQuery,
    TurnNotFound,
    TurnNotInHistory,
    fork_session,
)
from nexus.testing.conformance.support import (
    has,
    open_turn,
    qa_turn,
    reply,
    texts,
    user,
    write_turn,
)

# --------------------------------------------------------------------------- sessions


async def test_sessions_create_get_list_filters(ledger: Ledger) -> None:
    a = await ledger.sessions.create(NewSession("a"))
    await ledger.sessions.create(
        NewSession("w1", origin="subagent", is_subagent=True, parent_session_label="a", task_status="running")
    )
    assert a.label == "a" and a.origin == "user" and a.status == "active" and a.thread_id is None
    assert (await ledger.sessions.get("w1")).is_subagent
    assert [s.label for s in await ledger.sessions.list(SessionQuery(is_subagent=True))] == ["w1"]
    assert [s.label for s in await ledger.sessions.list(SessionQuery(origin="user"))] == ["a"]
    await ledger.sessions.update("a", status="archived")
    assert [s.label for s in await ledger.sessions.list(SessionQuery(status="archived"))] == ["a"]
    assert (await ledger.sessions.get("a")).status == "archived"
    later = (await ledger.sessions.get("w1")).updated_at + 10_000
    assert await ledger.sessions.list(SessionQuery(updated_since=later)) == []
    generated = await ledger.sessions.create(NewSession())
    assert generated.label.startswith("session-")


async def test_session_metadata_merges_and_a_none_removes_a_key(ledger: Ledger) -> None:
    """A display title (the web UI's rename) is metadata: merged, never a new label."""
    await ledger.sessions.create(NewSession("chat", metadata={"agent": "coder"}))
    await ledger.sessions.update("chat", metadata={"title": "Plans"})
    assert (await ledger.sessions.get("chat")).metadata == {"agent": "coder", "title": "Plans"}
    await ledger.sessions.update("chat", status="archived", metadata={"title": None})
    archived = await ledger.sessions.get("chat")
    assert archived.metadata == {"agent": "coder"} and archived.status == "archived" and archived.label == "chat"
    with pytest.raises(SessionNotFound):
        await ledger.sessions.update("nope", metadata={"title": "x"})


async def test_session_errors(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("a"))
    with pytest.raises(SessionExistsError, match="'a' already exists"):
        await ledger.sessions.create(NewSession("a"))
    with pytest.raises(SessionNotFound, match="'nope'"):
        await ledger.sessions.get("nope")
    with pytest.raises(SessionNotFound):
        await ledger.turns.history("nope")
    with pytest.raises(SessionNotFound):
        await write_turn(ledger, None, "nope", query_messages=[user("x")], response_messages=[reply("y")])


async def test_aliases_label_then_alias_then_create(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("main"))
    await ledger.sessions.add_alias("phone:+1555", "main", reason="identity_promotion")
    assert (await ledger.sessions.resolve("phone:+1555")).label == "main"
    assert (await ledger.sessions.ensure(NewSession("phone:+1555"))).label == "main"
    assert (await ledger.sessions.ensure(NewSession("brand-new"))).label == "brand-new"
    with pytest.raises(SessionExistsError):
        await ledger.sessions.add_alias("main", "brand-new")
    with pytest.raises(SessionNotFound):
        await ledger.sessions.add_alias("x", "missing")
    await qa_turn(ledger, "main", "q", "a")
    assert texts(await ledger.turns.history("phone:+1555")) == ["U:q", "A:a"]


async def test_an_alias_works_wherever_a_label_does(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("main"))
    await ledger.sessions.add_alias("al", "main")
    await qa_turn(ledger, "al", "q1", "a1")
    opened = await open_turn(ledger, "al", query_messages=[user("q2")])
    await write_turn(ledger, opened, "al", response_messages=[reply("a2")])
    assert (await ledger.turns.get(opened)).session_label == "main"
    assert texts(await ledger.turns.history("main")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    await ledger.sessions.update("al", task_status="running")
    await ledger.sessions.update("al", status="archived")
    assert (await ledger.sessions.get("main")).status == "archived" and (
        await ledger.sessions.get("main")
    ).task_status == "running"
    if has(ledger, "pointer_log"):
        assert [e.thread_id for e in await ledger.sessions.timeline("al")] == [
            t.id for t in await ledger.turns.path("main")
        ]


async def test_a_turn_restores_the_archived_session_it_goes_to(ledger: Ledger) -> None:
    """New activity un-archives: a run into an archived session left it hidden from every list (a stranger's
    trial), by label or alias, whether the turn is written at once or opened and closed (a streamed run)."""
    await ledger.sessions.create(NewSession("old"))
    await ledger.sessions.add_alias("old-alias", "old")
    await qa_turn(ledger, "old", "q1", "a1")
    for write_by in ("old", "old-alias"):
        await ledger.sessions.update("old", status="archived")
        assert [s.label for s in await ledger.sessions.list(SessionQuery(status="active"))] == []
        await qa_turn(ledger, write_by, "again", "back")
        assert (await ledger.sessions.get("old")).status == "active"
    await ledger.sessions.update("old", status="archived")
    opened = await open_turn(ledger, "old", query_messages=[user("streamed")])
    assert [s.label for s in await ledger.sessions.list(SessionQuery(status="active"))] == ["old"]
    await write_turn(ledger, opened, "old", response_messages=[reply("done")])
    assert texts(await ledger.turns.history("old"))[-2:] == ["U:streamed", "A:done"]


async def test_one_fork_rule_for_every_door(ledger: Ledger) -> None:
    """``fork_session``: any turn; a session named must hold it; without a label ``<session>-fork-N``.

    The CLI took any turn and named forks ``main-fork-1``; HTTP refused a turn outside the session and named
    them ``fork-<ulid>``."""
    await ledger.sessions.create(NewSession("main"))
    await ledger.sessions.create(NewSession("other"))
    first = await qa_turn(ledger, "main", "q1", "a1")
    foreign = await qa_turn(ledger, "other", "x", "y")
    assert (await fork_session(ledger, first)).label == "main-fork-1"
    assert (await fork_session(ledger, first, of="main")).label == "main-fork-2"
    branch = await fork_session(ledger, first, of="main-fork-1")
    assert branch.label == "main-fork-1-fork-1" and branch.thread_id == first and branch.origin == "fork"
    assert (await fork_session(ledger, foreign)).label == "other-fork-1", "no session named: any turn"
    with pytest.raises(TurnNotInHistory, match="not in the history of session 'main'"):
        await fork_session(ledger, foreign, of="main")
    with pytest.raises(TurnNotFound, match="no turn"):
        await fork_session(ledger, "01NOTATURN", of="main")
    with pytest.raises(SessionExistsError):
        await fork_session(ledger, first, label="other")
    named = await fork_session(ledger, first, label="try-b", metadata={"title": "B"})
    assert (named.label, named.thread_id, named.metadata) == ("try-b", first, {"title": "B"})
