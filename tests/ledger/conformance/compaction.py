"""Compaction turns: what history keeps after them and which records are refused."""

from __future__ import annotations

import pytest
from helpers import reply, texts, user

from conformance.common import compact_turn, qa_turn
from nexus.ledger import LedgerBackend

# --------------------------------------------------------------------------- compaction


def test_conformance_history_after_compaction_keeps_kept_turns(backend: LedgerBackend) -> None:
    backend.create_session("s")
    ids = [qa_turn(backend, "s", f"q{i}", f"a{i}") for i in range(1, 6)]
    comp = compact_turn(backend, "s", through=ids[2], first_kept=ids[3])
    prefix = "U:[Previous conversation summary]\nthey talked about 1 and 2"
    # Right after the compaction the kept turns T4, T5 are still there (the spec's code sent nothing).
    assert texts(backend.history("s")) == [prefix, "U:q4", "A:a4", "U:q5", "A:a5"]
    qa_turn(backend, "s", "q6", "a6")
    assert texts(backend.history("s")) == [prefix, "U:q4", "A:a4", "U:q5", "A:a5", "U:q6", "A:a6"]
    head = backend.get_turn(comp)
    assert head.turn_type == "compaction"
    rec = backend.compaction(comp)
    assert rec is not None and rec.first_kept_turn_id == ids[3] and rec.model == "cheap-model"
    assert backend.compaction(ids[0]) is None
    assert len(backend.turns("s")) == 7  # old turns stay walkable


def test_conformance_compaction_with_response_and_nothing_kept(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = qa_turn(backend, "s", "q1", "a1")
    # an engine turn that compacted during execution: it carries the retried query and its answer
    c = compact_turn(
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
    t1 = qa_turn(backend, "s", "q1", "a1")
    foreign = qa_turn(backend, "other", "x", "y")
    with pytest.raises(Exception, match="not an ancestor"):
        compact_turn(backend, "s", through=t1, first_kept=foreign)
    assert backend.head("s").id == t1  # type: ignore[union-attr]
    with pytest.raises(Exception, match="CompactionRecord"):
        backend.write_turn(None, "s", turn_type="compaction", response_messages=[reply("x")])
