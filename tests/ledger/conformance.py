"""Conformance suite for ``nexus.ledger.LedgerBackend`` implementations.

Every backend must pass these tests. They use only the Protocol's methods. A test module
brings them in with ``from conformance import *`` and the ``backend`` fixture below runs each
test against every factory in ``BACKENDS``; a new backend (PostgreSQL) adds its factory here
or overrides the ``backend`` fixture in its own module.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import reply, texts, tool_round, user

from nexus.ledger import (
    CompactionRecord,
    HeadMovedError,
    Ledger,
    LedgerBackend,
    LedgerError,
    PiFormatError,
    SessionExistsError,
    SessionNotFound,
    ToolCallRecord,
    TurnNotFound,
    TurnStateError,
)
from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "pi-sessions"
if not FIXTURES.exists():
    FIXTURES = Path("/work/shared/fixtures/pi-sessions")

BACKENDS: dict[str, Callable[[Path], LedgerBackend]] = {
    "sqlite-memory": lambda tmp: Ledger.open(":memory:"),
    "sqlite-file": lambda tmp: Ledger.open(tmp / "agents.db"),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerBackend]:
    """A fresh, empty ledger of each registered backend."""
    ledger = BACKENDS[request.param](tmp_path)
    yield ledger
    ledger.close()


def _turn(ledger: LedgerBackend, session: str, q: str, a: str, **kw: object) -> str:
    return ledger.write_turn(None, session, query_messages=[user(q)], response_messages=[reply(a)], **kw)  # type: ignore[arg-type]


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
    _turn(backend, "main", "q", "a")
    assert texts(backend.history("phone:+1555")) == ["U:q", "A:a"]


def test_conformance_an_alias_works_wherever_a_label_does(backend: LedgerBackend) -> None:
    backend.create_session("main")
    backend.add_alias("al", "main")
    _turn(backend, "al", "q1", "a1")
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


# --------------------------------------------------------------------------- writing


def test_conformance_write_turn_moves_head_and_stores_everything(backend: LedgerBackend) -> None:
    backend.create_session("s")
    response = [*tool_round("c1"), reply("done", input_tokens=20, output_tokens=4)]
    t1 = backend.write_turn(None, "s", query_messages=[user("hi")], response_messages=response, model="m", provider="p")
    head = backend.head("s")
    assert head is not None and head.id == t1 and head.status == "completed" and head.depth == 0
    assert head.total_tokens == 10 + 24 and head.thread_total_tokens == 34
    assert head.model == "m" and head.tool_call_count == 1 and head.message_count == 4
    assert texts(backend.history("s")) == ["U:hi", "A:call(c1)", "R:c1", "A:done"]
    calls = backend.tool_calls(t1)
    assert [(c.call_id, c.tool_name, c.status, c.arguments) for c in calls] == [
        ("c1", "read", "completed", {"path": "c1.txt"})
    ]
    assert calls[0].result is not None and calls[0].result.text == "file body"
    stored = backend.messages(t1)
    assert [m.ordinal for m in stored] == [0, 1, 2, 3]
    assert head.query_message_ids == (stored[0].id,) and head.response_message_id == stored[3].id
    assert backend.get_message(stored[2].id).message == stored[2].message
    t2 = _turn(backend, "s", "again", "ok")
    second = backend.get_turn(t2)
    assert second.parent_turn_id == t1 and second.depth == 1 and second.thread_total_tokens == 34 + 15
    assert backend.get_turn(t1).has_children
    assert [e.thread_id for e in backend.timeline("s")] == [t1, t2]


def test_conformance_unknown_ids_raise_specific_errors(backend: LedgerBackend) -> None:
    backend.create_session("s")
    for call in (
        lambda: backend.get_turn("01NOPE"),
        lambda: backend.messages("01NOPE"),
        lambda: backend.ancestry("01NOPE"),
        lambda: backend.fork("01NOPE"),
        lambda: backend.get_message(123456789),
        lambda: backend.write_turn("01NOPE", "s", response_messages=[reply("x")]),
        lambda: backend.journal_message("01NOPE", reply("x")),
    ):
        with pytest.raises(TurnNotFound):
            call()
    with pytest.raises(TurnNotFound):
        backend.write_turn(None, "s", parent_turn_id="01NOPE", if_head_moved="branch", response_messages=[reply("x")])
    with pytest.raises(TurnNotFound):
        backend.create_session("on-nothing", head_turn_id="01NOPE")
    assert [s.label for s in backend.list_sessions()] == ["s"]
    with pytest.raises(SessionNotFound):
        backend.aliases("nope")


def test_conformance_stale_parent_raises_head_moved_never_forks(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = _turn(backend, "s", "one", "1")
    t2 = _turn(backend, "s", "two", "2")
    with pytest.raises(HeadMovedError, match="moved to head") as info:
        _turn(backend, "s", "stale", "x", parent_turn_id=t1)
    assert info.value.expected == t1 and info.value.actual == t2
    assert backend.head("s").id == t2  # type: ignore[union-attr]
    assert [c.id for c in backend.children(t1)] == [t2]
    with pytest.raises(TurnStateError, match="if_head_moved"):
        _turn(backend, "s", "typo", "x", parent_turn_id=t1, if_head_moved="Branch")
    side = _turn(backend, "s", "side", "b", parent_turn_id=t1, if_head_moved="branch")
    assert backend.head("s").id == t2  # type: ignore[union-attr]
    assert {c.id for c in backend.children(t1)} == {t2, side}
    assert backend.sessions_containing(side) == []


def test_conformance_racing_open_turns_loser_gets_head_moved(backend: LedgerBackend) -> None:
    backend.create_session("s")
    _turn(backend, "s", "base", "b")
    first = backend.open_turn("s", query_messages=[user("A")])
    second = backend.open_turn("s", query_messages=[user("B")])
    backend.write_turn(first, "s", response_messages=[reply("a")])
    with pytest.raises(HeadMovedError):
        backend.write_turn(second, "s", response_messages=[reply("b")])
    assert texts(backend.history("s")) == ["U:base", "A:b", "U:A", "A:a"]
    assert backend.get_turn(second).is_open  # the loser is still open, nothing half-written
    backend.write_turn(second, "s", response_messages=[reply("b")], if_head_moved="branch")
    assert not backend.get_turn(second).is_open
    assert texts(backend.history_at(second)) == ["U:base", "A:b", "U:B", "A:b"]


def test_conformance_closed_turn_cannot_be_written_again(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t = _turn(backend, "s", "q", "a")
    with pytest.raises(TurnStateError, match="already closed"):
        backend.write_turn(t, "s", response_messages=[reply("again")])
    with pytest.raises(TurnStateError):
        backend.journal_message(t, reply("late"))
    with pytest.raises(TurnStateError, match="status must be"):
        backend.write_turn(None, "s", status="streaming", response_messages=[reply("x")])


# --------------------------------------------------------------------------- forks and pointers


def test_conformance_fork_shares_history_and_copies_nothing(backend: LedgerBackend) -> None:
    backend.create_session("main", persona_id="atlas")
    t1 = _turn(backend, "main", "q1", "a1")
    t2 = _turn(backend, "main", "q2", "a2")
    fork = backend.fork(t1, "alt")
    assert fork.origin == "fork" and fork.thread_id == t1 and fork.persona_id == "atlas"
    t3 = _turn(backend, "alt", "q3", "a3")
    assert texts(backend.history("alt")) == ["U:q1", "A:a1", "U:q3", "A:a3"]
    assert texts(backend.history("main")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert backend.ancestry(t3) == [t1, t3]
    assert sorted(backend.sessions_containing(t1)) == ["alt", "main"]
    assert backend.sessions_containing(t2) == ["main"]
    assert len(backend.messages(t1)) == 2  # shared, not copied


def test_conformance_move_pointer_head_at_and_timeline(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = _turn(backend, "s", "q1", "a1")
    time.sleep(0.005)
    t2 = _turn(backend, "s", "q2", "a2")
    backend.move_pointer("s", t1)
    assert backend.head("s").id == t1  # type: ignore[union-attr]
    log = backend.timeline("s")
    assert [(e.thread_id, e.reason) for e in log] == [(t1, "write"), (t2, "write"), (t1, "move")]
    assert backend.head_at("s", log[0].changed_at).id == t1  # type: ignore[union-attr]
    assert backend.head_at("s", log[1].changed_at).id in (t2, t1)  # type: ignore[union-attr]
    assert backend.head_at("s", log[0].changed_at - 1) is None
    t3 = _turn(backend, "s", "q3", "a3")  # writing after a move builds on the new head: a branch
    assert backend.ancestry(t3) == [t1, t3]
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q3", "A:a3"]


def test_conformance_random_tree_matches_reference_model(backend: LedgerBackend) -> None:
    """Random extends, forks from any turn and pointer moves: history always equals a naive parent walk."""
    rng = random.Random(7)
    backend.create_session("s0")
    parent: dict[str, str | None] = {}
    own: dict[str, list[str]] = {}
    sessions = ["s0"]
    heads: dict[str, str | None] = {"s0": None}
    for i in range(160):
        label = rng.choice(sessions)
        action = rng.random()
        if action < 0.15 and parent:
            target = rng.choice(sorted(parent))
            new = f"s{len(sessions)}"
            backend.fork(target, new)
            sessions.append(new)
            heads[new] = target
            continue
        if action < 0.22 and parent:
            target = rng.choice(sorted(parent))
            backend.move_pointer(label, target)
            heads[label] = target
            continue
        tid = _turn(backend, label, f"q{i}", f"a{i}")
        parent[tid], own[tid] = heads[label], [f"U:q{i}", f"A:a{i}"]
        heads[label] = tid
    for label in sessions:
        expected: list[str] = []
        node = heads[label]
        chain: list[str] = []
        while node is not None:
            chain.append(node)
            node = parent[node]
        for tid in reversed(chain):
            expected.extend(own[tid])
        assert texts(backend.history(label)) == expected, label
        if chain:
            assert backend.ancestry(chain[0]) == list(reversed(chain))
            assert backend.get_turn(chain[0]).depth == len(chain) - 1


# --------------------------------------------------------------------------- compaction


def _compact(backend: LedgerBackend, session: str, through: str, first_kept: str | None, **kw: object) -> str:
    record = CompactionRecord(
        summary="they talked about 1 and 2",
        summarized_through_turn_id=through,
        first_kept_turn_id=first_kept,
        turns_summarized=2,
        model="cheap-model",
        tokens_before=1000,
        tokens_after=200,
        trigger="context_limit",
    )
    return backend.write_turn(None, session, compaction=record, **kw)  # type: ignore[arg-type]


def test_conformance_history_after_compaction_keeps_kept_turns(backend: LedgerBackend) -> None:
    backend.create_session("s")
    ids = [_turn(backend, "s", f"q{i}", f"a{i}") for i in range(1, 6)]
    comp = _compact(backend, "s", through=ids[2], first_kept=ids[3])
    prefix = "U:[Previous conversation summary]\nthey talked about 1 and 2"
    # Right after the compaction the kept turns T4, T5 are still there (the spec's code sent nothing).
    assert texts(backend.history("s")) == [prefix, "U:q4", "A:a4", "U:q5", "A:a5"]
    _turn(backend, "s", "q6", "a6")
    assert texts(backend.history("s")) == [prefix, "U:q4", "A:a4", "U:q5", "A:a5", "U:q6", "A:a6"]
    head = backend.get_turn(comp)
    assert head.turn_type == "compaction"
    rec = backend.compaction(comp)
    assert rec is not None and rec.first_kept_turn_id == ids[3] and rec.model == "cheap-model"
    assert backend.compaction(ids[0]) is None
    assert len(backend.turns("s")) == 7  # old turns stay walkable


def test_conformance_compaction_with_response_and_nothing_kept(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = _turn(backend, "s", "q1", "a1")
    # an engine turn that compacted during execution: it carries the retried query and its answer
    c = _compact(
        backend,
        "s",
        through=t1,
        first_kept=None,
        query_messages=[user("retry")],
        response_messages=[reply("r")],
        turn_type="normal",
    )
    assert backend.get_turn(c).turn_type == "compaction"
    assert texts(backend.history("s")) == [
        "U:[Previous conversation summary]\nthey talked about 1 and 2",
        "U:retry",
        "A:r",
    ]


def test_conformance_compaction_rejects_foreign_first_kept(backend: LedgerBackend) -> None:
    backend.create_session("s")
    backend.create_session("other")
    t1 = _turn(backend, "s", "q1", "a1")
    foreign = _turn(backend, "other", "x", "y")
    with pytest.raises(Exception, match="not an ancestor"):
        _compact(backend, "s", through=t1, first_kept=foreign)
    assert backend.head("s").id == t1  # type: ignore[union-attr]
    with pytest.raises(Exception, match="CompactionRecord"):
        backend.write_turn(None, "s", turn_type="compaction", response_messages=[reply("x")])


# --------------------------------------------------------------------------- journal and recovery


def test_conformance_open_turn_is_in_no_history_until_closed(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = _turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("q2")], model="m", provider="p", run_id="run-1")
    assert backend.get_turn(open_id).status == "streaming"
    assert backend.head("s").id == t1  # type: ignore[union-attr]
    assert texts(backend.history("s")) == ["U:q1", "A:a1"]
    assert [t.id for t in backend.open_turns()] == [open_id]
    with pytest.raises(TurnStateError):
        backend.fork(open_id)
    with pytest.raises(TurnStateError):
        backend.move_pointer("s", open_id)
    call = ToolCall("c9", "bash", {"command": "ls"})
    result = ToolResultMessage("c9", "bash", [TextContent("a b")])
    backend.journal_tool_call(open_id, call, result, 100, 200, spawned_session_label="worker:1")
    backend.write_turn(open_id, "s", response_messages=[*tool_round("c9", "bash", "a b"), reply("done")])
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q2", "A:call(c9)", "R:c9", "A:done"]
    calls = backend.tool_calls(open_id)
    assert [(c.call_id, c.started_at, c.completed_at, c.spawned_session_label) for c in calls] == [
        ("c9", 100, 200, "worker:1")
    ]
    assert backend.open_turns() == []
    assert backend.get_turn(open_id).run_id == "run-1"


def test_conformance_open_turn_cannot_become_a_history_by_any_door(backend: LedgerBackend) -> None:
    backend.create_session("s")
    _turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("q2")])
    with pytest.raises(TurnStateError, match="still open"):
        backend.history_at(open_id)  # would show a half turn (and, cached, hide its response later)
    with pytest.raises(TurnStateError, match="still open"):
        backend.create_session("x", head_turn_id=open_id)
    with pytest.raises(TurnStateError, match="still open"):
        backend.ensure_session("y", head_turn_id=open_id)
    assert {s.label for s in backend.list_sessions()} == {"s"}
    assert backend.sessions_containing(open_id) == []
    backend.write_turn(open_id, "s", response_messages=[reply("a2")])
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert texts(backend.history_at(open_id)) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert texts(backend.history(backend.create_session("x", head_turn_id=open_id).label)) == texts(
        backend.history("s")
    )


def test_conformance_recover_closes_open_turn_as_aborted_with_journal(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = _turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("q2")], model="m", provider="p")
    for i in range(2):
        call = ToolCall(f"c{i}", "read", {"path": f"{i}.txt"})
        backend.journal_tool_call(open_id, call, ToolResultMessage(f"c{i}", "read", [TextContent(f"r{i}")]), i, i + 1)
    assert backend.recover(force=True) == [open_id]
    turn = backend.get_turn(open_id)
    assert turn.status == "aborted" and turn.stop_reason == "aborted" and turn.tool_call_count == 2
    assert turn.error is not None and "closed by recover()" in str(turn.error["message"])
    assert backend.head("s").id == open_id  # type: ignore[union-attr]
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q2", "A:call(c0,c1)", "R:c0", "R:c1"]
    assert backend.timeline("s")[-1].reason == "recover"
    assert backend.recover(force=True) == []
    assert backend.get_turn(t1).has_children


def test_conformance_recover_keeps_side_branch_when_head_moved(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = _turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("lost")])
    backend.journal_message(open_id, reply("partial answer"))
    t2 = _turn(backend, "s", "q2", "a2")  # another run moved the head meanwhile
    assert backend.recover(force=True) == [open_id]
    assert backend.head("s").id == t2  # type: ignore[union-attr]
    assert backend.get_turn(open_id).status == "aborted"
    assert texts(backend.history_at(open_id)) == ["U:q1", "A:a1", "U:lost", "A:partial answer"]
    assert {c.id for c in backend.children(t1)} == {open_id, t2}


def test_conformance_tool_call_records_from_caller(backend: LedgerBackend) -> None:
    backend.create_session("s")
    rec = ToolCallRecord(
        "c1",
        "spawn",
        {"task": "x"},
        status="completed",
        started_at=5,
        completed_at=9,
        spawned_session_label="worker:abc",
    )
    t = backend.write_turn(
        None,
        "s",
        query_messages=[user("go")],
        response_messages=[*tool_round("c1", "spawn"), reply("ok")],
        tool_calls=[rec],
    )
    got = backend.tool_calls(t)
    assert [(c.call_id, c.spawned_session_label, c.started_at) for c in got] == [("c1", "worker:abc", 5)]


# --------------------------------------------------------------------------- pi session files


def _pi_messages(path: Path) -> list[dict[str, object]]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [e["message"] for e in lines if e.get("type") == "message"]


@pytest.mark.parametrize("name", ["openai-tools-3-turns", "anthropic-thinking-2-turns"])
def test_conformance_pi_round_trip_preserves_every_message(backend: LedgerBackend, tmp_path: Path, name: str) -> None:
    source = FIXTURES / f"{name}.jsonl"
    result = backend.import_pi(source, "imported")
    original = _pi_messages(source)
    assert result.messages == len(original) and result.fork_labels == []
    assert result.kept_entries == {"model_change": 1, "thinking_level_change": 1}
    first = backend.history("imported")
    assert len(first) == len(original)
    head = backend.head("imported")
    assert head is not None and head.provider in ("fakeprov", "fakeclaude")
    out = backend.export_pi("imported", tmp_path / "out.jsonl")
    assert _pi_messages(out) == original  # every message, field for field, in pi's shapes
    exported = [json.loads(x) for x in out.read_text().splitlines()]
    assert exported[0]["type"] == "session" and exported[0]["version"] == 3
    assert any(e["type"] == "model_change" for e in exported)
    assert all(len(e["id"]) == 8 and "T" in e["timestamp"] for e in exported[1:])
    backend.import_pi(out, "again")
    assert backend.history("again") == first


def test_conformance_pi_branches_become_forks_and_compaction_turns(backend: LedgerBackend, tmp_path: Path) -> None:
    entries = [
        {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        _pi_msg("a1", None, "user", "first"),
        _pi_msg("a2", "a1", "assistant", "answer one"),
        _pi_msg("b1", "a2", "user", "branch B"),
        _pi_msg("b2", "b1", "assistant", "answer B"),
        _pi_msg("c1", "a2", "user", "branch C"),
        _pi_msg("c2", "c1", "assistant", "answer C"),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "c2",
            "timestamp": "2026-01-01T00:00:09.000Z",
            "summary": "S",
            "firstKeptEntryId": "c1",
            "tokensBefore": 500,
        },
        {
            "type": "label",
            "id": "l1",
            "parentId": "k1",
            "timestamp": "2026-01-01T00:00:09.500Z",
            "targetId": "c1",
            "label": "keep",
        },
        _pi_msg("d1", "l1", "user", "after compaction"),
        _pi_msg("d2", "d1", "assistant", "answer D"),
    ]
    path = tmp_path / "branches.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = backend.import_pi(path, "pi")
    assert result.compactions == 1 and result.kept_entries == {"compaction": 1, "label": 1}
    assert len(result.fork_labels) == 1
    assert texts(backend.history(result.fork_labels[0])) == ["U:first", "A:answer one", "U:branch B", "A:answer B"]
    assert texts(backend.history("pi")) == [
        "U:[Previous conversation summary]\nS",
        "U:branch C",
        "A:answer C",
        "U:after compaction",
        "A:answer D",
    ]
    out = backend.export_pi("pi", tmp_path / "out.jsonl")
    exported = [json.loads(x) for x in out.read_text().splitlines()]
    kept = [e["id"] for e in exported[1:] if e["type"] != "model_change"]
    assert kept == ["a1", "a2", "c1", "c2", "k1", "l1", "d1", "d2"]  # pi ids survive the round trip
    assert exported[1]["type"] == "model_change" and exported[1]["modelId"] == "m"  # pi files start with one
    assert [e["parentId"] for e in exported[1:]] == [None] + [e["id"] for e in exported[1:-1]]  # one linear path


def _pi_msg(entry_id: str, parent: str | None, role: str, text: str) -> dict[str, object]:
    message: dict[str, object] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        message.update(
            api="openai-completions",
            provider="p",
            model="m",
            stopReason="stop",
            usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
        )
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": message,
    }


@pytest.mark.parametrize(
    ("mutate", "line", "problem"),
    [
        (lambda lines: [*lines[:-1], lines[-1][: len(lines[-1]) // 2]], 17, "not valid JSON"),
        (lambda lines: [lines[0].replace('"version":3', '"version":1'), *lines[1:]], 1, "version 1"),
        (lambda lines: [lines[0].replace('"version":3', '"version":99'), *lines[1:]], 1, "version 99"),
        (lambda lines: lines[1:], 1, "session header"),
        (
            lambda lines: [*lines[:5], lines[5].replace('"parentId":"f22afedd"', '"parentId":"ffffffff"'), *lines[6:]],
            6,
            "no earlier line",
        ),
        (lambda lines: [*lines, lines[3]], 18, "duplicate entry id"),
        (
            lambda lines: [
                *lines,
                '{"type":"message","id":"zz","parentId":"b19d5ab9","message":{"role":"assistant",'
                '"content":[{"type":"video"}]}}',
            ],
            18,
            "invalid assistant message",
        ),
    ],
)
def test_conformance_pi_bad_files_name_the_line_and_import_nothing(
    backend: LedgerBackend, tmp_path: Path, mutate: Callable[[list[str]], list[str]], line: int, problem: str
) -> None:
    lines = (FIXTURES / "openai-tools-3-turns.jsonl").read_text().splitlines()
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(mutate(lines)) + "\n")
    with pytest.raises(PiFormatError, match=problem) as info:
        backend.import_pi(path, "bad")
    assert info.value.line == line and f"bad.jsonl:{line}:" in str(info.value)
    assert backend.list_sessions() == []


def test_conformance_pi_unreadable_file_is_a_ledger_error(backend: LedgerBackend, tmp_path: Path) -> None:
    for path in (tmp_path / "missing.jsonl", tmp_path):
        with pytest.raises(LedgerError, match="cannot read the pi session file"):
            backend.import_pi(path, "x")
    assert backend.list_sessions() == []


def test_conformance_pi_import_is_one_transaction(backend: LedgerBackend) -> None:
    backend.create_session("taken")
    with pytest.raises(SessionExistsError):
        backend.import_pi(FIXTURES / "openai-tools-3-turns.jsonl", "taken")
    assert [s.label for s in backend.list_sessions()] == ["taken"]
    assert backend.history("taken") == []


def test_conformance_exported_native_session_imports_back(backend: LedgerBackend, tmp_path: Path) -> None:
    backend.create_session("native")
    t1 = backend.write_turn(
        None,
        "native",
        query_messages=[UserMessage([TextContent("look")])],
        response_messages=[*tool_round("c1"), reply("seen")],
    )
    _compact(backend, "native", through=t1, first_kept=t1)
    _turn(backend, "native", "next", "fine")
    out = backend.export_pi("native", tmp_path / "native.jsonl")
    entries = [json.loads(x) for x in out.read_text().splitlines()]
    assert [e["type"] for e in entries] == [
        "session",
        "model_change",
        "message",
        "message",
        "message",
        "message",
        "compaction",
        "message",
        "message",
    ]
    assert entries[3]["message"]["stopReason"] == "toolUse"
    assert entries[6]["firstKeptEntryId"] == entries[2]["id"]
    backend.import_pi(out, "back")
    assert texts(backend.history("back")) == texts(backend.history("native"))


# --------------------------------------------------------------------------- durable queue rows


def test_conformance_queue_items_survive_and_finish_once(backend: LedgerBackend) -> None:
    backend.create_session("s")
    first = backend.enqueue("s", {"role": "user", "content": "one"}, mode="followup")
    second = backend.enqueue("s", {"role": "user", "content": "two"}, mode="collect", metadata={"event": "e1"})
    assert [i.id for i in backend.pending_queue_items("s")] == [first.id, second.id]
    assert first.status == "queued" and first.message == {"role": "user", "content": "one"}
    running = backend.update_queue_item(first.id, "processing")
    assert running.started_at is not None and running.completed_at is None
    t = _turn(backend, "s", "one", "ok")
    done = backend.update_queue_item(first.id, "delivered", turn_id=t)
    assert done.turn_id == t and done.completed_at is not None
    with pytest.raises(Exception, match="already delivered"):
        backend.update_queue_item(first.id, "processing")
    with pytest.raises(Exception, match="queue status must be"):
        backend.update_queue_item(second.id, "lost")
    assert [i.id for i in backend.pending_queue_items()] == [second.id]
    with pytest.raises(SessionNotFound):
        backend.enqueue("missing", "x", mode="followup")
    with pytest.raises(TurnNotFound):
        backend.update_queue_item("01NOPE", "processing")


@pytest.mark.parametrize("seed", range(4))
def test_conformance_tree_questions_match_a_naive_parent_walk(backend: LedgerBackend, seed: int) -> None:
    """ancestry, children, has_children, sessions_containing and history_at against a plain dict of parents."""
    rng = random.Random(seed)
    parent: dict[str, str | None] = {}
    heads: dict[str, str | None] = {"s0": None}
    backend.create_session("s0")
    for step in range(80):
        label, roll = rng.choice(sorted(heads)), rng.random()
        if roll < 0.6 or not parent:
            t = _turn(backend, label, f"q{step}", f"a{step}")
            parent[t], heads[label] = heads[label], t
        elif roll < 0.75:
            t = rng.choice(sorted(parent))
            heads[backend.fork(t).label] = t
        elif roll < 0.85:
            t = rng.choice(sorted(parent))
            backend.move_pointer(label, t)
            heads[label] = t
        else:
            t = rng.choice(sorted(parent))
            side = _turn(backend, label, f"b{step}", "b", parent_turn_id=t, if_head_moved="branch")
            parent[side] = t
            if heads[label] == t:
                heads[label] = side

    def path(t: str | None) -> list[str]:
        out: list[str] = []
        while t is not None:
            out.append(t)
            t = parent[t]
        return out[::-1]

    for t in parent:
        assert backend.ancestry(t) == path(t)
        kids = sorted(c for c, p in parent.items() if p == t)
        assert sorted(c.id for c in backend.children(t)) == kids
        assert bool(backend.get_turn(t).has_children) == bool(kids)
        assert backend.sessions_containing(t) == sorted(lbl for lbl, h in heads.items() if t in path(h))
        assert len(backend.history_at(t)) == 2 * len(path(t))
    for label, h in heads.items():
        head = backend.head(label)
        assert (None if head is None else head.id) == h


def test_conformance_recover_keeps_journaled_assistant_message_and_marks_unfinished_calls(
    backend: LedgerBackend,
) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")], model="m", provider="p")
    asked = tool_round("c1")[0]
    assert isinstance(asked, AssistantMessage)
    asked = AssistantMessage(
        [*asked.content, ToolCall("c2", "bash", {"command": "sleep 99"})],
        api=asked.api,
        provider=asked.provider,
        model=asked.model,
        stop_reason="tool_use",
    )
    backend.journal_message(opened, asked)
    result = ToolResultMessage("c1", "read", [TextContent("file body")])
    backend.journal_tool_call(opened, ToolCall("c1", "read", {"path": "c1.txt"}), result, 10, 20)
    assert backend.recover(force=True) == [opened]
    turn = backend.get_turn(opened)
    assert turn.status == "aborted" and backend.head("s") == turn
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:call(c1,c2)", "R:c1"]
    assert history[1:] == [asked, result]  # the journaled messages, whole; c2 never got a result
    calls = {c.call_id: (c.status, c.started_at, c.error is None) for c in backend.tool_calls(opened)}
    assert calls == {"c1": ("completed", 10, True), "c2": ("failed", asked.timestamp, False)}
    assert backend.recover(force=True) == []  # closed once


# --------------------------------------------------------------------------- streamed replies (journal_partial)


def _streaming(text: str, *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        [TextContent(text), *calls], api="openai-completions", provider="fake", model="fake-model", timestamp=5
    )


def test_conformance_journal_partial_replaces_its_entry_and_recover_closes_it_aborted(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")], model="fake-model", provider="fake")
    for words in ("Once", "Once upon", "Once upon a time"):
        backend.journal_partial(opened, 0, _streaming(words))
    assert backend.recover(force=True) == [opened]
    turn = backend.get_turn(opened)
    assert turn.status == "aborted" and turn.stop_reason == "aborted" and backend.head("s") == turn
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:Once upon a time"]  # one message: each write replaced the last
    cut = history[-1]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    assert cut.error_message is not None and "died mid-reply" in cut.error_message
    assert (cut.model, cut.provider, cut.timestamp) == ("fake-model", "fake", 5)


def test_conformance_recover_places_replies_between_tool_calls_in_order(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")], model="m", provider="p")
    call = ToolCall("c1", "read", {"path": "a.txt"})
    backend.journal_partial(opened, 0, _streaming("let me look"))  # streaming, before the call is complete
    asked = replace(_streaming("let me look", call), stop_reason="tool_use")
    backend.journal_partial(opened, 0, asked, complete=True)  # ended: kept whole, at its first position
    result = ToolResultMessage("c1", "read", [TextContent("file body")])
    backend.journal_tool_call(opened, call, result, 10, 20)
    backend.journal_partial(opened, 1, _streaming("The file s"))
    backend.journal_partial(opened, 1, _streaming("The file says", ToolCall("c2", "read", {"path": "b.txt"})))
    assert backend.recover(force=True) == [opened]
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:let me look", "R:c1", "A:The file says"]
    assert history[1] == asked and history[2] == result  # the ended reply is kept as it was
    cut = history[3]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    assert [c.id for c in cut.tool_calls] == ["c2"]  # a complete call the process never ran
    calls = {c.call_id: c.status for c in backend.tool_calls(opened)}
    assert calls == {"c1": "completed", "c2": "failed"}


def test_conformance_partial_entry_keeps_its_first_position_when_replaced(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")])
    backend.journal_partial(opened, 0, _streaming("first"))
    backend.journal_message(opened, UserMessage("steer: be brief"))
    backend.journal_partial(opened, 1, _streaming("second"))
    backend.journal_partial(opened, 0, _streaming("first, finished"), complete=True)  # a late final write of slot 0
    backend.journal_partial(opened, 2, _streaming(""))  # nothing streamed yet: left out
    backend.recover(force=True)
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:first, finished", "U:steer: be brief", "A:second"]
    assert [m.stop_reason for m in history if isinstance(m, AssistantMessage)] == ["stop", "aborted"]


def test_conformance_write_turn_replaces_partial_entries(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")])
    backend.journal_partial(opened, 0, _streaming("half an ans"))
    final = reply("half an answer, then the rest")
    backend.journal_partial(opened, 0, final, complete=True)
    backend.write_turn(opened, "s", response_messages=[final])
    assert texts(backend.history("s")) == ["U:q", "A:half an answer, then the rest"]
    assert [m.role for m in backend.messages(opened)] == ["user", "assistant"]
    assert backend.recover(force=True) == []
    with pytest.raises(TurnStateError, match="already closed"):
        backend.journal_partial(opened, 1, _streaming("late"))
    assert texts(backend.history("s")) == ["U:q", "A:half an answer, then the rest"]


def test_conformance_journal_partial_bad_input_is_a_clear_error(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")])
    with pytest.raises(TurnNotFound):
        backend.journal_partial("01NOPE", 0, _streaming("x"))
    with pytest.raises(LedgerError, match="AssistantMessage"):
        backend.journal_partial(opened, 0, UserMessage("not a reply"))  # type: ignore[arg-type]
    for slot in (-1, True, "0"):
        with pytest.raises(LedgerError, match="slot"):
            backend.journal_partial(opened, slot, _streaming("x"))  # type: ignore[arg-type]
    backend.journal_partial(opened, 0, _streaming("kept"))  # nothing was stored by the bad calls
    backend.recover(force=True)
    assert texts(backend.history("s")) == ["U:q", "A:kept"]
