"""A system prompt is hashed and written once per turn store, not once per turn.

An agent sends the same system prompt turn after turn; each turn's open hashed it (SHA-256 of a few KB)
and ran an ``INSERT ... ON CONFLICT DO NOTHING`` of the whole text. The store now remembers prompts it
committed; one whose transaction rolled back is not remembered (its row does not exist). Real SQLite; the
statements are the writer connection's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexus.ledger import HeadMovedError, Ledger, NewSession, TurnDetails, TurnOpen
from nexus.ledger._prompts import prompt_hash, read_prompt
from nexus.ledger._sql_db import run_inline
from nexus.testing.conformance.support import user

PROMPT = "You are a careful agent.\n" * 100


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.ensure(NewSession("s")))
        yield opened


def _open(ledger: Ledger, prompt: str, parent: object = None) -> str:
    details = TurnDetails(model="fake-model", provider="fake")
    opening = TurnOpen("s", [user("q")], details, system_prompt=prompt)
    if parent is not None:
        opening.parent_turn_id = parent
    return run_inline(ledger.turns.open(opening))


def _hash_of(ledger: Ledger, turn_id: str) -> str:
    row = ledger.database.read(
        lambda conn: conn.execute("SELECT system_prompt_hash FROM turns WHERE id = ?", (turn_id,)).fetchone()
    )
    return str(row[0])


def test_a_prompt_sent_on_every_turn_is_written_once(sql_trace: Callable[[Ledger], list[str]], ledger: Ledger) -> None:
    statements = sql_trace(ledger)
    turns = [_open(ledger, PROMPT) for _ in range(3)]
    inserts = [s for s in statements if s.startswith("INSERT INTO system_prompts")]
    assert len(inserts) == 1
    assert {_hash_of(ledger, turn) for turn in turns} == {prompt_hash(PROMPT)}
    assert ledger.database.read(lambda conn: read_prompt(conn, prompt_hash(PROMPT))) == PROMPT
    _open(ledger, PROMPT + "changed")  # another prompt is written (and its own hash kept)
    assert len([s for s in statements if s.startswith("INSERT INTO system_prompts")]) == 2


def test_a_prompt_whose_open_rolled_back_is_written_by_the_next_open(ledger: Ledger) -> None:
    with pytest.raises(HeadMovedError):  # a parent that is not the head: nothing of the open commits
        _open(ledger, PROMPT, parent="01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    assert ledger.database.read(lambda conn: read_prompt(conn, prompt_hash(PROMPT))) is None
    turn = _open(ledger, PROMPT)
    assert _hash_of(ledger, turn) == prompt_hash(PROMPT)
    assert ledger.database.read(lambda conn: read_prompt(conn, prompt_hash(PROMPT))) == PROMPT
