"""The engine's window load (``history(..., max_chars=)``) against the full history, on random trees.

For any tree of turns, forks, pointer moves and compactions, with the message cache on or off
and windows asked for in any order, the window must be the full history's summary (if any)
followed by the shortest tail of whole turns whose stored bodies hold ``max_chars`` characters
(or the whole history when it holds fewer). The reference is computed here from the full
history (itself proven against a naive parent walk by the conformance suite), the turns'
stored messages and the body lengths read straight from SQLite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus.ledger import CompactionRecord, Ledger, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.records import SUMMARY_PREFIX
from nexus.llm.types import Message, UserMessage
from nexus.testing.conformance.support import reply, tool_round, user


def _summary_len(history: list[Message]) -> int:
    first = history[0] if history else None
    is_summary = isinstance(first, UserMessage) and isinstance(first.content, str)
    return 1 if is_summary and first.content.startswith(SUMMARY_PREFIX) else 0  # type: ignore[union-attr]


def expected_window(reference: Ledger, db: sqlite3.Connection, head: str, max_chars: int) -> list[Message]:
    """The summary + the shortest whole-turn tail of the full history holding ``max_chars`` body characters."""
    full = run_inline(reference.turns.history_at(head))
    lead = _summary_len(full)
    remaining = len(full) - lead  # messages of the full history not yet assigned to a turn, newest first
    total = 0
    for turn_id in reversed(run_inline(reference.turns.ancestry(head))):
        if remaining == 0 or total >= max_chars:
            break
        rows = run_inline(reference.turns.messages(turn_id))
        assert len(rows) <= remaining  # a history starts at a turn boundary
        total += sum(db.execute("SELECT length(body) FROM messages WHERE key = ?", (r.id,)).fetchone()[0] for r in rows)
        remaining -= len(rows)
    return full[:lead] + full[lead + remaining :]


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Operations: ``(kind, a, b)`` with kind turn/fork/move/compact and two small numbers to pick with."""
    kinds = st.sampled_from(["turn", "turn", "turn", "turn", "fork", "move", "compact"])
    small = st.integers(min_value=0, max_value=40)
    return draw(st.lists(st.tuples(kinds, small, small), min_size=1, max_size=40))


def _build(ledger: Ledger, ops: list[tuple[str, int, int]]) -> list[str]:
    """Apply ``ops`` (sessions s0, s1, ...); returns every closed turn id, oldest first."""
    run_inline(ledger.sessions.create(NewSession("s0")))
    sessions, turns = ["s0"], []
    for n, (kind, a, b) in enumerate(ops):
        label = sessions[a % len(sessions)]
        if kind == "fork" and turns:
            sessions.append(
                run_inline(
                    ledger.sessions.create(
                        NewSession(f"s{len(sessions)}", origin="fork", head_turn_id=turns[b % len(turns)])
                    )
                ).label
            )
        elif kind == "move" and turns:
            run_inline(ledger.sessions.move_pointer(label, turns[b % len(turns)]))
        elif kind == "compact" and run_inline(ledger.sessions.head(label)) is not None:
            path = run_inline(ledger.turns.ancestry(run_inline(ledger.sessions.head(label)).id))  # type: ignore[union-attr]
            kept = None if b % 3 == 0 else path[b % len(path)]
            record = CompactionRecord(f"summary {n}", path[-1], kept, len(path), "cheap-model")
            turns.append(
                run_inline(
                    ledger.turns.write(TurnWrite(label, None, query_messages=[user(f"retry {n}")], compaction=record))
                )
            )
        else:
            response = [*tool_round(f"c{n}", result="x" * (b * 7))] if b % 2 else []
            turns.append(
                run_inline(
                    ledger.turns.write(
                        TurnWrite(
                            label,
                            None,
                            query_messages=[user(f"q{n} " + "y" * b)],
                            response_messages=[*response, reply(f"a{n}")],
                        )
                    )
                )
            )
    return turns


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=trees(), budgets=st.lists(st.integers(min_value=0, max_value=2_000), min_size=1, max_size=6))
@pytest.mark.parametrize("cache", [0, 50_000, 7])
def test_window_is_the_tail_of_the_full_history_that_fits(
    tmp_path: Path, cache: int, ops: list[tuple[str, int, int]], budgets: list[int]
) -> None:
    db_path = tmp_path / f"w{abs(hash((tuple(ops), tuple(budgets), cache)))}.db"
    ledger = Ledger.open(db_path, message_cache=cache)
    reference = Ledger.open(db_path, message_cache=0)  # the full history as the old path reads it
    db = sqlite3.connect(db_path)
    try:
        turns = _build(ledger, ops)
        for head in turns[-4:]:
            full = run_inline(reference.turns.history_at(head))
            for budget in budgets:
                assert run_inline(ledger.turns.history_at(head, max_chars=budget)) == expected_window(
                    reference, db, head, budget
                )
            # a window larger than the whole history is the whole history; the cache stays right after windows
            assert run_inline(ledger.turns.history_at(head, max_chars=10**9)) == full
            assert run_inline(ledger.turns.history_at(head)) == full
        for session in sorted(run_inline(ledger.sessions.list()), key=lambda s: s.label):
            if session.thread_id is not None:
                window = run_inline(ledger.turns.history(session.label, max_chars=budgets[0]))
                assert window == expected_window(reference, db, session.thread_id, budgets[0])
            path = run_inline(reference.turns.path(session.label))
            for limit in {0, 1, 3, budgets[-1] % 50, len(path)}:
                assert run_inline(ledger.turns.path(session.label, limit=limit)) == (path[-limit:] if limit else [])
    finally:
        db.close()
        reference.close()
        ledger.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(db_path) + suffix).unlink(missing_ok=True)


def test_window_reads_only_the_rows_it_returns(tmp_path: Path) -> None:
    """A window of the newest turn of a 300-turn session does a small fraction of the full load's SQL work."""
    ledger = Ledger.open(tmp_path / "a.db", message_cache=0)
    run_inline(ledger.sessions.create(NewSession("s")))
    for i in range(300):
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user(f"q{i}")], response_messages=[reply(f"a{i}")]))
        )
    conn = ledger.database.connection
    steps: list[int] = []

    def count() -> int:
        steps.append(1)
        return 0

    conn.set_progress_handler(count, 1)  # one call per SQLite VM instruction
    window = run_inline(ledger.turns.history("s", max_chars=1))
    window_steps = len(steps)
    steps.clear()
    full = run_inline(ledger.turns.history("s"))
    conn.set_progress_handler(None, 0)
    assert [m.content if isinstance(m, UserMessage) else m.text for m in window] == ["q299", "a299"]  # type: ignore[union-attr]
    assert len(full) == 600
    assert window_steps * 20 < len(steps)  # the window load's SQL work does not grow with the ancestry
    ledger.close()


def test_negative_budget_is_refused() -> None:
    ledger = Ledger.open(":memory:")
    run_inline(ledger.sessions.create(NewSession("s")))
    run_inline(ledger.turns.write(TurnWrite("s", None, query_messages=[user("q")], response_messages=[reply("a")])))
    with pytest.raises(ValueError, match="max_chars must be zero or more"):
        run_inline(ledger.turns.history("s", max_chars=-1))
    assert run_inline(ledger.turns.history("s", max_chars=0)) == []
    ledger.close()


@pytest.mark.parametrize("version", [1, 2])
def test_window_of_a_file_written_by_the_old_code(tmp_path: Path, version: int) -> None:
    """Files of schema 1 and 2 (the real old code's, version-2 bodies): each turn's window is a tail of its history."""
    from test_migrations import _restore

    path = tmp_path / "agents.db"
    _restore(version, path)
    with Ledger.open(path) as ledger, Ledger.open(path, message_cache=0) as reference:
        db = sqlite3.connect(path)
        heads = [
            t
            for s in run_inline(ledger.sessions.list())
            if s.thread_id
            for t in run_inline(ledger.turns.ancestry(s.thread_id))
        ]
        closed = [t for t in dict.fromkeys(heads) if run_inline(ledger.turns.get(t)).status != "streaming"]
        assert len(closed) >= 3
        for head in closed:
            full = run_inline(reference.turns.history_at(head))
            assert run_inline(ledger.turns.history_at(head, max_chars=10**9)) == full
            for budget in (0, 1, 200, 2_000):
                assert run_inline(ledger.turns.history_at(head, max_chars=budget)) == expected_window(
                    reference, db, head, budget
                )
        db.close()
