"""Writing turns, forks, session pointers, and tree questions checked against reference models."""

from __future__ import annotations

import random
import time

import pytest
from helpers import reply, texts, tool_round, user

from conformance.common import qa_turn
from nexus.ledger import HeadMovedError, LedgerBackend, SessionNotFound, TurnNotFound, TurnStateError

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
    t2 = qa_turn(backend, "s", "again", "ok")
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
    t1 = qa_turn(backend, "s", "one", "1")
    t2 = qa_turn(backend, "s", "two", "2")
    with pytest.raises(HeadMovedError, match="moved to head") as info:
        qa_turn(backend, "s", "stale", "x", parent_turn_id=t1)
    assert info.value.expected == t1 and info.value.actual == t2
    assert backend.head("s").id == t2  # type: ignore[union-attr]
    assert [c.id for c in backend.children(t1)] == [t2]
    with pytest.raises(TurnStateError, match="if_head_moved"):
        qa_turn(backend, "s", "typo", "x", parent_turn_id=t1, if_head_moved="Branch")
    side = qa_turn(backend, "s", "side", "b", parent_turn_id=t1, if_head_moved="branch")
    assert backend.head("s").id == t2  # type: ignore[union-attr]
    assert {c.id for c in backend.children(t1)} == {t2, side}
    assert backend.sessions_containing(side) == []


def test_conformance_racing_open_turns_loser_gets_head_moved(backend: LedgerBackend) -> None:
    backend.create_session("s")
    qa_turn(backend, "s", "base", "b")
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
    t = qa_turn(backend, "s", "q", "a")
    with pytest.raises(TurnStateError, match="already closed"):
        backend.write_turn(t, "s", response_messages=[reply("again")])
    with pytest.raises(TurnStateError):
        backend.journal_message(t, reply("late"))
    with pytest.raises(TurnStateError, match="status must be"):
        backend.write_turn(None, "s", status="streaming", response_messages=[reply("x")])


# --------------------------------------------------------------------------- forks and pointers


def test_conformance_fork_shares_history_and_copies_nothing(backend: LedgerBackend) -> None:
    backend.create_session("main", persona_id="atlas")
    t1 = qa_turn(backend, "main", "q1", "a1")
    t2 = qa_turn(backend, "main", "q2", "a2")
    fork = backend.fork(t1, "alt")
    assert fork.origin == "fork" and fork.thread_id == t1 and fork.persona_id == "atlas"
    t3 = qa_turn(backend, "alt", "q3", "a3")
    assert texts(backend.history("alt")) == ["U:q1", "A:a1", "U:q3", "A:a3"]
    assert texts(backend.history("main")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert backend.ancestry(t3) == [t1, t3]
    assert sorted(backend.sessions_containing(t1)) == ["alt", "main"]
    assert backend.sessions_containing(t2) == ["main"]
    assert len(backend.messages(t1)) == 2  # shared, not copied


def test_conformance_move_pointer_head_at_and_timeline(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = qa_turn(backend, "s", "q1", "a1")
    time.sleep(0.005)
    t2 = qa_turn(backend, "s", "q2", "a2")
    backend.move_pointer("s", t1)
    assert backend.head("s").id == t1  # type: ignore[union-attr]
    log = backend.timeline("s")
    assert [(e.thread_id, e.reason) for e in log] == [(t1, "write"), (t2, "write"), (t1, "move")]
    assert backend.head_at("s", log[0].changed_at).id == t1  # type: ignore[union-attr]
    assert backend.head_at("s", log[1].changed_at).id in (t2, t1)  # type: ignore[union-attr]
    assert backend.head_at("s", log[0].changed_at - 1) is None
    t3 = qa_turn(backend, "s", "q3", "a3")  # writing after a move builds on the new head: a branch
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
        tid = qa_turn(backend, label, f"q{i}", f"a{i}")
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
            t = qa_turn(backend, label, f"q{step}", f"a{step}")
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
            side = qa_turn(backend, label, f"b{step}", "b", parent_turn_id=t, if_head_moved="branch")
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
