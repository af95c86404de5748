"""Compaction turns: what history keeps after them and which records are refused."""

from __future__ import annotations

import pytest

from nexus.ledger import (
    Ledger,
    NewSession,
)
from nexus.testing.conformance.support import (
    compact_turn,
    qa_turn,
    reply,
    texts,
    user,
    write_turn,
)

# --------------------------------------------------------------------------- compaction


async def test_history_after_compaction_keeps_kept_turns(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    ids = [await qa_turn(ledger, "s", f"q{i}", f"a{i}") for i in range(1, 6)]
    comp = await compact_turn(ledger, "s", through=ids[2], first_kept=ids[3])
    prefix = "U:[Previous conversation summary]\nthey talked about 1 and 2"
    # Right after the compaction the kept turns T4, T5 are still there (the spec's code sent nothing).
    assert texts(await ledger.turns.history("s")) == [prefix, "U:q4", "A:a4", "U:q5", "A:a5"]
    await qa_turn(ledger, "s", "q6", "a6")
    assert texts(await ledger.turns.history("s")) == [prefix, "U:q4", "A:a4", "U:q5", "A:a5", "U:q6", "A:a6"]
    head = await ledger.turns.get(comp)
    assert head.turn_type == "compaction"
    rec = await ledger.turns.compaction(comp)
    assert rec is not None and rec.first_kept_turn_id == ids[3] and rec.model == "cheap-model"
    assert await ledger.turns.compaction(ids[0]) is None
    assert len(await ledger.turns.path("s")) == 7  # old turns stay walkable


async def test_compaction_with_response_and_nothing_kept(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    # an engine turn that compacted during execution: it carries the retried query and its answer
    c = await compact_turn(
        ledger,
        "s",
        through=t1,
        first_kept=None,
        query_messages=[user("retry")],
        response_messages=[reply("r")],
        turn_type="normal",
    )
    assert (await ledger.turns.get(c)).turn_type == "compaction"
    assert texts(await ledger.turns.history("s")) == [
        "U:[Previous conversation summary]\nthey talked about 1 and 2",
        "U:retry",
        "A:r",
    ]


async def test_compaction_rejects_foreign_first_kept(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    await ledger.sessions.create(NewSession("other"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    foreign = await qa_turn(ledger, "other", "x", "y")
    with pytest.raises(Exception, match="not an ancestor"):
        await compact_turn(ledger, "s", through=t1, first_kept=foreign)
    assert (await ledger.sessions.head("s")).id == t1  # type: ignore[union-attr]
    with pytest.raises(Exception, match="CompactionRecord"):
        await write_turn(ledger, None, "s", turn_type="compaction", response_messages=[reply("x")])
