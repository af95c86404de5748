"""Writing turns, forks, session pointers, and tree questions checked against reference models."""

from __future__ import annotations

import asyncio
import random

import pytest

from nexus.ledger import (
    HeadMovedError,
    JournalMessage,
    Ledger,
    NewSession,
    SessionNotFound,
    SessionQuery,
    TurnNotFound,
    TurnStateError,
)
from nexus.testing.conformance.support import (
    fork,
    has,
    need,
    open_turn,
    qa_turn,
    reply,
    texts,
    tool_round,
    user,
    write_turn,
)

# --------------------------------------------------------------------------- writing


async def test_write_turn_moves_head_and_stores_everything(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    response = [*tool_round("c1"), reply("done", input_tokens=20, output_tokens=4)]
    t1 = await write_turn(
        ledger, None, "s", query_messages=[user("hi")], response_messages=response, model="m", provider="p"
    )
    head = await ledger.sessions.head("s")
    assert head is not None and head.id == t1 and head.status == "completed" and head.depth == 0
    assert head.total_tokens == 10 + 24 and head.thread_total_tokens == 34
    assert head.model == "m" and head.tool_call_count == 1 and head.message_count == 4
    assert texts(await ledger.turns.history("s")) == ["U:hi", "A:call(c1)", "R:c1", "A:done"]
    calls = await ledger.turns.tool_calls(t1)
    assert [(c.call_id, c.tool_name, c.status, c.arguments) for c in calls] == [
        ("c1", "read", "completed", {"path": "c1.txt"})
    ]
    assert calls[0].result is not None and calls[0].result.text == "file body"
    stored = await ledger.turns.messages(t1)
    assert [m.ordinal for m in stored] == [0, 1, 2, 3]
    assert head.query_message_ids == (stored[0].id,) and head.response_message_id == stored[3].id
    assert (await ledger.turns.message(stored[2].id)).message == stored[2].message
    t2 = await qa_turn(ledger, "s", "again", "ok")
    second = await ledger.turns.get(t2)
    assert second.parent_turn_id == t1 and second.depth == 1 and second.thread_total_tokens == 34 + 15
    assert (await ledger.turns.get(t1)).has_children
    if has(ledger, "pointer_log"):
        assert [e.thread_id for e in await ledger.sessions.timeline("s")] == [t1, t2]


async def test_head_history_reads_label_head_and_window_together(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    assert await ledger.turns.head_history("s") == ("s", None, [])
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    t2 = await qa_turn(ledger, "s", "q2", "a2")
    await ledger.sessions.add_alias("phone:+1555", "s", reason="identity_promotion")
    label, head, history = await ledger.turns.head_history("phone:+1555")
    assert (label, head, texts(history)) == ("s", t2, ["U:q1", "A:a1", "U:q2", "A:a2"])
    assert history == await ledger.turns.history_at(t2)
    _, _, window = await ledger.turns.head_history("s", max_chars=1)  # the newest turn at least
    assert texts(window) == ["U:q2", "A:a2"] and t1 != t2
    with pytest.raises(SessionNotFound):
        await ledger.turns.head_history("nope")


async def test_unknown_ids_raise_specific_errors(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    for call in (
        lambda: ledger.turns.get("01NOPE"),
        lambda: ledger.turns.messages("01NOPE"),
        lambda: fork(ledger, "01NOPE"),
        lambda: write_turn(ledger, "01NOPE", "s", response_messages=[reply("x")]),
        lambda: ledger.turns.journal([JournalMessage("01NOPE", reply("x"))]),
    ):
        with pytest.raises(TurnNotFound):
            await call()
    with pytest.raises(TurnNotFound):
        await write_turn(
            ledger, None, "s", parent_turn_id="01NOPE", if_head_moved="branch", response_messages=[reply("x")]
        )
    with pytest.raises(TurnNotFound):
        await ledger.sessions.create(NewSession("on-nothing", head_turn_id="01NOPE"))
    assert [s.label for s in await ledger.sessions.list(SessionQuery())] == ["s"]
    with pytest.raises(SessionNotFound):
        await ledger.sessions.aliases("nope")


async def test_stale_parent_raises_head_moved_never_forks(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "one", "1")
    t2 = await qa_turn(ledger, "s", "two", "2")
    with pytest.raises(HeadMovedError, match="moved to head") as info:
        await qa_turn(ledger, "s", "stale", "x", parent_turn_id=t1)
    assert info.value.expected == t1 and info.value.actual == t2
    assert (await ledger.sessions.head("s")).id == t2  # type: ignore[union-attr]
    if has(ledger, "tree"):
        assert [c.id for c in await ledger.turns.children(t1)] == [t2]
    with pytest.raises(TurnStateError, match="if_head_moved"):
        await qa_turn(ledger, "s", "typo", "x", parent_turn_id=t1, if_head_moved="Branch")
    side = await qa_turn(ledger, "s", "side", "b", parent_turn_id=t1, if_head_moved="branch")
    assert (await ledger.sessions.head("s")).id == t2  # type: ignore[union-attr]
    if has(ledger, "tree"):
        assert {c.id for c in await ledger.turns.children(t1)} == {t2, side}
    if has(ledger, "pointer_log"):
        assert await ledger.sessions.containing(side) == []


async def test_racing_open_turns_loser_gets_head_moved(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    await qa_turn(ledger, "s", "base", "b")
    first = await open_turn(ledger, "s", query_messages=[user("A")])
    second = await open_turn(ledger, "s", query_messages=[user("B")])
    await write_turn(ledger, first, "s", response_messages=[reply("a")])
    with pytest.raises(HeadMovedError):
        await write_turn(ledger, second, "s", response_messages=[reply("b")])
    assert texts(await ledger.turns.history("s")) == ["U:base", "A:b", "U:A", "A:a"]
    assert (await ledger.turns.get(second)).is_open  # the loser is still open, nothing half-written
    await write_turn(ledger, second, "s", response_messages=[reply("b")], if_head_moved="branch")
    assert not (await ledger.turns.get(second)).is_open
    assert texts(await ledger.turns.history_at(second)) == ["U:base", "A:b", "U:B", "A:b"]


async def test_closed_turn_cannot_be_written_again(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    t = await qa_turn(ledger, "s", "q", "a")
    with pytest.raises(TurnStateError, match="already closed"):
        await write_turn(ledger, t, "s", response_messages=[reply("again")])
    with pytest.raises(TurnStateError):
        await ledger.turns.journal([JournalMessage(t, reply("late"))])
    with pytest.raises(TurnStateError, match="status must be"):
        await write_turn(ledger, None, "s", status="streaming", response_messages=[reply("x")])


# --------------------------------------------------------------------------- forks and pointers


async def test_fork_shares_history_and_copies_nothing(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("main", persona_id="atlas"))
    t1 = await qa_turn(ledger, "main", "q1", "a1")
    t2 = await qa_turn(ledger, "main", "q2", "a2")
    alt = await fork(ledger, t1, "alt")
    assert alt.origin == "fork" and alt.thread_id == t1 and alt.persona_id == "atlas"
    t3 = await qa_turn(ledger, "alt", "q3", "a3")
    assert texts(await ledger.turns.history("alt")) == ["U:q1", "A:a1", "U:q3", "A:a3"]
    assert texts(await ledger.turns.history("main")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    if has(ledger, "tree"):
        assert await ledger.turns.ancestry(t3) == [t1, t3]
    if has(ledger, "pointer_log"):
        assert sorted(await ledger.sessions.containing(t1)) == ["alt", "main"]
    if has(ledger, "pointer_log"):
        assert await ledger.sessions.containing(t2) == ["main"]
    assert len(await ledger.turns.messages(t1)) == 2  # shared, not copied


async def test_move_pointer_head_at_and_timeline(ledger: Ledger) -> None:
    need(ledger, "pointer_log", "tree")
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    await asyncio.sleep(0.005)
    t2 = await qa_turn(ledger, "s", "q2", "a2")
    await ledger.sessions.move_pointer("s", t1)
    assert (await ledger.sessions.head("s")).id == t1  # type: ignore[union-attr]
    log = await ledger.sessions.timeline("s")
    assert [(e.thread_id, e.reason) for e in log] == [(t1, "write"), (t2, "write"), (t1, "move")]
    assert (await ledger.sessions.head_at("s", log[0].changed_at)).id == t1  # type: ignore[union-attr]
    assert (await ledger.sessions.head_at("s", log[1].changed_at)).id in (t2, t1)  # type: ignore[union-attr]
    assert await ledger.sessions.head_at("s", log[0].changed_at - 1) is None
    t3 = await qa_turn(ledger, "s", "q3", "a3")  # writing after a move builds on the new head: a branch
    assert await ledger.turns.ancestry(t3) == [t1, t3]
    assert texts(await ledger.turns.history("s")) == ["U:q1", "A:a1", "U:q3", "A:a3"]


async def test_random_tree_matches_reference_model(ledger: Ledger) -> None:
    """Random extends, forks from any turn and pointer moves: history always equals a naive parent walk."""
    rng = random.Random(7)
    await ledger.sessions.create(NewSession("s0"))
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
            await fork(ledger, target, new)
            sessions.append(new)
            heads[new] = target
            continue
        if action < 0.22 and parent:
            target = rng.choice(sorted(parent))
            await ledger.sessions.move_pointer(label, target)
            heads[label] = target
            continue
        tid = await qa_turn(ledger, label, f"q{i}", f"a{i}")
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
        assert texts(await ledger.turns.history(label)) == expected, label
        if chain:
            if has(ledger, "tree"):
                assert await ledger.turns.ancestry(chain[0]) == list(reversed(chain))
            assert (await ledger.turns.get(chain[0])).depth == len(chain) - 1


@pytest.mark.parametrize("seed", range(4))
async def test_tree_questions_match_a_naive_parent_walk(ledger: Ledger, seed: int) -> None:
    """ancestry, children, has_children, sessions_containing and history_at against a plain dict of parents."""
    need(ledger, "pointer_log", "tree")
    rng = random.Random(seed)
    parent: dict[str, str | None] = {}
    heads: dict[str, str | None] = {"s0": None}
    await ledger.sessions.create(NewSession("s0"))
    for step in range(80):
        label, roll = rng.choice(sorted(heads)), rng.random()
        if roll < 0.6 or not parent:
            t = await qa_turn(ledger, label, f"q{step}", f"a{step}")
            parent[t], heads[label] = heads[label], t
        elif roll < 0.75:
            t = rng.choice(sorted(parent))
            heads[(await fork(ledger, t)).label] = t
        elif roll < 0.85:
            t = rng.choice(sorted(parent))
            await ledger.sessions.move_pointer(label, t)
            heads[label] = t
        else:
            t = rng.choice(sorted(parent))
            side = await qa_turn(ledger, label, f"b{step}", "b", parent_turn_id=t, if_head_moved="branch")
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
        assert await ledger.turns.ancestry(t) == path(t)
        kids = sorted(c for c, p in parent.items() if p == t)
        assert sorted(c.id for c in await ledger.turns.children(t)) == kids
        assert bool((await ledger.turns.get(t)).has_children) == bool(kids)
        assert await ledger.sessions.containing(t) == sorted(lbl for lbl, h in heads.items() if t in path(h))
        assert len(await ledger.turns.history_at(t)) == 2 * len(path(t))
    for label, h in heads.items():
        head = await ledger.sessions.head(label)
        assert (None if head is None else head.id) == h
