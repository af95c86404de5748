"""A streamed reply's journal entry on SQLite: replaced in one statement, and never on a closed turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus.ledger import JournalReply, Ledger, NewSession, TurnOpen, TurnStateError
from nexus.ledger._sql_db import run_inline
from nexus.llm import AssistantMessage, TextContent, UserMessage


def _open(tmp_path: Path) -> tuple[Ledger, str]:
    ledger = Ledger.open(tmp_path / "agents.db")
    run_inline(ledger.sessions.ensure(NewSession("s")))
    return ledger, run_inline(ledger.turns.open(TurnOpen("s", [UserMessage("list the files")])))


def _reply(text: str) -> AssistantMessage:
    return AssistantMessage([TextContent(text)], api="openai-completions", provider="openai", model="gpt-4o-mini")


def _bodies(ledger: Ledger) -> list[str]:
    rows = ledger.database.connection.execute("SELECT body FROM turn_journal ORDER BY ordinal").fetchall()
    return [json.loads(body)["message"]["content"][0]["text"] for (body,) in rows]


def test_replacing_a_streamed_replys_entry_is_one_statement(tmp_path: Path) -> None:
    """The writer replaces each streaming run's entry ~4 times a second: the open-turn check rides on the UPDATE."""
    ledger, turn = _open(tmp_path)
    run_inline(ledger.turns.journal([JournalReply(turn, 0, _reply("The"))]))
    conn = ledger.database.connection
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        run_inline(ledger.turns.journal([JournalReply(turn, 0, _reply("The workspace holds"))]))
    finally:
        conn.set_trace_callback(None)
    reads_and_writes = [s for s in statements if s.split(None, 1)[0] in ("SELECT", "UPDATE", "INSERT", "DELETE")]
    assert len(reads_and_writes) == 1, statements
    assert reads_and_writes[0].startswith("UPDATE turn_journal")
    assert _bodies(ledger) == ["The workspace holds"]
    ledger.close()


def test_a_closed_turn_keeps_its_reply_entry_as_it_was(tmp_path: Path) -> None:
    """A turn closed while its slot's entry is still there (as a recovery leaves it) takes no new snapshot."""
    ledger, turn = _open(tmp_path)
    run_inline(ledger.turns.journal([JournalReply(turn, 0, _reply("The"))]))
    with ledger.database.connection as conn:
        conn.execute("UPDATE turns SET status = 'aborted' WHERE id = ?", (turn,))
    with pytest.raises(TurnStateError, match="already closed"):
        run_inline(ledger.turns.journal([JournalReply(turn, 0, _reply("The workspace holds"))]))
    assert _bodies(ledger) == ["The"]
    ledger.close()


def test_the_first_snapshot_of_a_reply_adds_its_entry(tmp_path: Path) -> None:
    """A slot with no entry yet (the UPDATE misses) is checked and inserted, after the entries before it."""
    ledger, turn = _open(tmp_path)
    run_inline(ledger.turns.journal([JournalReply(turn, 0, _reply("first reply"))]))
    run_inline(ledger.turns.journal([JournalReply(turn, 1, _reply("second"))]))
    run_inline(ledger.turns.journal([JournalReply(turn, 1, _reply("second reply"))]))
    assert _bodies(ledger) == ["first reply", "second reply"]
    ledger.close()
