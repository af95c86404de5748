"""An assistant message's ``origins`` id is looked up once per turn store, not once per turn.

Every assistant message stores its ``(api, provider, model)`` as an ``origins`` id; an agent writes the
same triple turn after turn, and each turn's write ran a ``SELECT`` for it. The store now remembers ids it
saw committed; an id whose insert rolled back is not remembered (the row does not exist). Real SQLite; the
statements are the writer connection's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from nexus.ledger import CompactionRecord, Ledger, NewSession, TurnNotFound, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.testing.conformance.support import compaction, reply, user


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.ensure(NewSession("s")))
        yield opened


def _write(ledger: Ledger, model: str = "fake-model", compacting: CompactionRecord | None = None) -> str:
    turn = TurnWrite("s", query_messages=[user("q")], response_messages=[replace(reply("a"), model=model)])
    turn.compaction = compacting
    return run_inline(ledger.turns.write(turn))


def _origin_reads(statements: list[str]) -> int:
    return len([s for s in statements if "FROM origins" in s or "INTO origins" in s])


def _models(ledger: Ledger) -> list[str]:
    turns = run_inline(ledger.turns.history("s"))
    return [m.model for m in turns if m.role == "assistant"]


def test_an_origin_written_on_every_turn_is_looked_up_once(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger
) -> None:
    statements = sql_trace(ledger)
    for _ in range(3):
        _write(ledger)
    assert _origin_reads(statements) == 2  # the first turn's SELECT (none yet) and INSERT
    _write(ledger, "other-model")  # another origin is looked up (and its own id kept)
    assert _origin_reads(statements) == 4
    _write(ledger)
    assert _origin_reads(statements) == 4
    assert _models(ledger) == ["fake-model"] * 3 + ["other-model", "fake-model"]


def test_an_origin_whose_write_rolled_back_is_looked_up_again(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger
) -> None:
    statements = sql_trace(ledger)
    with pytest.raises(TurnNotFound):  # checked after the messages are inserted: nothing of the write commits
        _write(ledger, "lost-model", compaction("01ZZZZZZZZZZZZZZZZZZZZZZZZ", None))
    before = _origin_reads(statements)
    assert before > 0  # the rolled-back transaction had inserted it
    _write(ledger, "lost-model")
    assert _origin_reads(statements) > before
    assert ledger.database.read(lambda c: c.execute("SELECT model FROM origins").fetchall()) == [("lost-model",)]
    assert _models(ledger) == ["lost-model"]


def test_a_window_reads_the_origins_table_only_for_an_id_it_has_not_seen(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger, tmp_path: Path
) -> None:
    """Each turn's window read decoded its new rows with the whole ``origins`` table, read again every turn."""

    def window() -> list[str]:
        history = run_inline(ledger.turns.history("s", max_chars=1_000_000))
        return [m.model for m in history if m.role == "assistant"]

    _write(ledger)
    statements = sql_trace(ledger)
    assert window() == ["fake-model"]
    first = len([s for s in statements if "FROM origins" in s])
    for count in range(2, 5):
        _write(ledger)
        assert window() == ["fake-model"] * count
    assert len([s for s in statements if "FROM origins" in s]) == first  # the ids were seen: no read
    with Ledger.open(tmp_path / "agents.db") as other:  # another writer adds an origin this store never saw
        elsewhere = [replace(reply("a"), model="elsewhere")]
        run_inline(other.turns.write(TurnWrite("s", query_messages=[user("q")], response_messages=elsewhere)))
    assert window() == ["fake-model"] * 4 + ["elsewhere"]
