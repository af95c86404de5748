"""The messages of a turn a store has just opened and written are answered from the rows it wrote.

A run reads its turn's messages back right after writing it (its result carries the ledger's ids); that
was a read transaction per turn (the turn's position, its rows, the ``origins`` table). A store now keeps
the rows it committed for a turn it opened, from the open to the read-back, and decodes those: the same
rows, so the same messages. Real SQLite; the statements are the database connection's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexus.ledger import HeadMovedError, Ledger, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm import UserMessage
from nexus.testing.conformance.support import open_turn, qa_turn, reply, user


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.ensure(NewSession("s")))
        yield opened


def _opened(ledger: Ledger) -> str:
    return run_inline(
        open_turn(ledger, "s", query_messages=[user("q")], source="api", context={"channel": "cli"}, model="m")
    )


def _close(ledger: Ledger, turn_id: str, *, if_head_moved: str = "raise") -> str:
    steer = UserMessage("and one more thing", 5)
    write = TurnWrite("s", turn_id, response_messages=[reply("a"), steer, reply("b")], if_head_moved=if_head_moved)
    write.response_sources = [None, "steer", None]
    return run_inline(ledger.turns.write(write))


def _fresh_read(path: Path, turn_id: str) -> list[object]:
    with Ledger.open(path) as other:
        return list(run_inline(other.turns.messages(turn_id)))


def test_the_read_back_of_a_turn_just_written_reads_nothing_and_matches_the_file(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger, tmp_path: Path
) -> None:
    turn_id = _close(ledger, _opened(ledger))
    statements = sql_trace(ledger)
    kept = run_inline(ledger.turns.messages(turn_id))
    assert statements == []  # no transaction, no SELECT
    assert kept == _fresh_read(tmp_path / "agents.db", turn_id)  # ids, ordinals, sources, context, bodies
    assert [m.source for m in kept] == ["api", None, "steer", None]
    assert kept[0].context == {"channel": "cli"}
    again = run_inline(ledger.turns.messages(turn_id))  # kept once: later reads read the file
    assert again == kept
    assert statements != []


def test_an_open_turn_and_a_turn_written_in_one_go_are_read(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger
) -> None:
    turn_id = _opened(ledger)
    statements = sql_trace(ledger)
    assert [m.role for m in run_inline(ledger.turns.messages(turn_id))] == ["user"]  # not finished: read
    assert statements != []
    _close(ledger, turn_id)
    whole = run_inline(qa_turn(ledger, "s", "q2", "a2"))  # not opened first: no run reads it back
    statements.clear()
    assert [m.text for m in run_inline(ledger.turns.messages(whole))] == ["q2", "a2"]
    assert statements != []


def test_a_write_that_rolled_back_keeps_nothing_and_its_retry_is_kept(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger, tmp_path: Path
) -> None:
    turn_id = _opened(ledger)
    run_inline(qa_turn(ledger, "s", "meanwhile", "another writer moved the head"))
    with pytest.raises(HeadMovedError):
        _close(ledger, turn_id)
    written = _close(ledger, turn_id, if_head_moved="branch")
    statements = sql_trace(ledger)
    kept = run_inline(ledger.turns.messages(written))
    assert statements == []
    assert kept == _fresh_read(tmp_path / "agents.db", written)
    assert [m.role for m in kept] == ["user", "assistant", "user", "assistant"]
