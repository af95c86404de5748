"""The session surface: create, get, list with filters, aliases and their errors."""

from __future__ import annotations

import pytest
from helpers import reply, texts, user

from conformance.common import qa_turn
from nexus.ledger import LedgerBackend, SessionExistsError, SessionNotFound

# --------------------------------------------------------------------------- sessions


def test_conformance_sessions_create_get_list_filters(backend: LedgerBackend) -> None:
    a = backend.create_session("a")
    backend.create_session("w1", origin="subagent", is_subagent=True, parent_session_label="a", task_status="running")
    assert a.label == "a" and a.origin == "user" and a.status == "active" and a.thread_id is None
    assert backend.get_session("w1").is_subagent
    assert [s.label for s in backend.list_sessions(is_subagent=True)] == ["w1"]
    assert [s.label for s in backend.list_sessions(origin="user")] == ["a"]
    backend.archive("a")
    assert [s.label for s in backend.list_sessions(status="archived")] == ["a"]
    assert backend.get_session("a").status == "archived"
    later = backend.get_session("w1").updated_at + 10_000
    assert backend.list_sessions(updated_since=later) == []
    generated = backend.create_session()
    assert generated.label.startswith("session-")


def test_conformance_session_errors(backend: LedgerBackend) -> None:
    backend.create_session("a")
    with pytest.raises(SessionExistsError, match="'a' already exists"):
        backend.create_session("a")
    with pytest.raises(SessionNotFound, match="'nope'"):
        backend.get_session("nope")
    with pytest.raises(SessionNotFound):
        backend.history("nope")
    with pytest.raises(SessionNotFound):
        backend.write_turn(None, "nope", query_messages=[user("x")], response_messages=[reply("y")])


def test_conformance_aliases_label_then_alias_then_create(backend: LedgerBackend) -> None:
    backend.create_session("main")
    backend.add_alias("phone:+1555", "main", reason="identity_promotion")
    assert backend.resolve_session("phone:+1555").label == "main"
    assert backend.ensure_session("phone:+1555").label == "main"
    assert backend.ensure_session("brand-new").label == "brand-new"
    with pytest.raises(SessionExistsError):
        backend.add_alias("main", "brand-new")
    with pytest.raises(SessionNotFound):
        backend.add_alias("x", "missing")
    qa_turn(backend, "main", "q", "a")
    assert texts(backend.history("phone:+1555")) == ["U:q", "A:a"]


def test_conformance_an_alias_works_wherever_a_label_does(backend: LedgerBackend) -> None:
    backend.create_session("main")
    backend.add_alias("al", "main")
    qa_turn(backend, "al", "q1", "a1")
    opened = backend.open_turn("al", query_messages=[user("q2")])
    backend.write_turn(opened, "al", response_messages=[reply("a2")])
    assert backend.get_turn(opened).session_label == "main"
    assert texts(backend.history("main")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    item = backend.enqueue("al", {"text": "later"}, mode="followup")
    assert item.session_label == "main" and backend.pending_queue_items("al") == [item]
    backend.set_task_status("al", "running")
    backend.archive("al")
    assert backend.get_session("main").status == "archived" and backend.get_session("main").task_status == "running"
    assert [e.thread_id for e in backend.timeline("al")] == [t.id for t in backend.turns("main")]
    with pytest.raises(SessionNotFound):
        backend.pending_queue_items("nobody")
