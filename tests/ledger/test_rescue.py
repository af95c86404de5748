"""Rescue files: where a turn goes when its final write fails, and how it gets back into the ledger."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession, TurnDetails, TurnOpen, TurnWrite, _rescue
from nexus.ledger._sql_db import run_inline
from nexus.testing.conformance.support import reply, user


def _opened(ledger: Ledger) -> str:
    run_inline(ledger.sessions.create(NewSession("s")))
    run_inline(ledger.turns.write(TurnWrite("s", None, query_messages=[user("q1")], response_messages=[reply("a1")])))
    return run_inline(ledger.turns.open(TurnOpen("s", [user("q2")], TurnDetails(model="fake-model", provider="fake"))))


def test_saved_next_to_the_ledger_then_recovered_with_its_true_status(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        turn_id = _opened(ledger)
        saved = _rescue.RescuedTurn(turn_id, "s", "completed", [reply("the answer")], "end_turn", None)
        path = _rescue.save(ledger.path, saved)
        assert path == tmp_path / "rescued" / f"turn-{turn_id}.json"
        assert json.loads(path.read_text())["text"] == "the answer"
        assert run_inline(ledger.turns.recover(turn_ids=[turn_id])) == [turn_id]
        head = run_inline(ledger.sessions.head("s"))
        assert head is not None and head.id == turn_id
        assert (head.status, head.stop_reason) == ("completed", "end_turn")
        assert [m.text for m in run_inline(ledger.turns.history("s")) if m.role == "assistant"] == ["a1", "the answer"]
    assert not path.exists()


def test_falls_back_to_the_temp_dir_when_the_ledger_dir_cannot_take_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    (tmp_path / "rescued").write_text("a file where the folder would go")
    with Ledger.open(tmp_path / "agents.db") as ledger:
        turn_id = _opened(ledger)
        saved = _rescue.RescuedTurn(turn_id, "s", "aborted", [reply("cut sh")], "aborted", "stopped")
        path = _rescue.save(ledger.path, saved)
        assert path is not None and path.is_relative_to(tmp_path / "tmp")
        assert _rescue.find(ledger.path, turn_id) == path
        run_inline(ledger.turns.recover(turn_ids=[turn_id]))
        assert run_inline(ledger.turns.get(turn_id)).status == "aborted"


def test_a_damaged_rescue_file_falls_back_to_the_journal(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        turn_id = _opened(ledger)
        folder = tmp_path / "rescued"
        folder.mkdir()
        (folder / f"turn-{turn_id}.json").write_text('{"format": "nexus-rescued-turn/1", "turn_')
        assert run_inline(ledger.turns.recover(turn_ids=[turn_id])) == [turn_id]
        turn = run_inline(ledger.turns.get(turn_id))
        assert turn.status == "aborted" and turn.error is not None


def test_a_rescued_turn_marks_the_queue_items_it_consumed(tmp_path: Path) -> None:
    from nexus.ledger.broker_store import BrokerStore

    with Ledger.open(tmp_path / "agents.db") as ledger:
        turn_id = _opened(ledger)
        store = BrokerStore(ledger.database)
        item, _ = store.accept(
            agent_id="w", session_label="s", message_id="m-1", sender="user", message={"content": "q2"}, mode="followup"
        )
        store.claim([item.id])
        saved = _rescue.RescuedTurn(turn_id, "s", "completed", [reply("done")], "end_turn", None, (item.id,))
        assert _rescue.save(ledger.path, saved) is not None
        assert run_inline(ledger.turns.recover(turn_ids=[turn_id])) == [turn_id]
        row = store.get_item(item.id)
        assert row is not None and (row.status, row.turn_id) == ("delivered", turn_id)


def test_a_postgresql_ledgers_rescue_files_go_to_the_temp_dir_never_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's URL is no path: it was taken for one, and a stop that could not write a turn left
    ``postgresql:/nexus@host:5432/rescued/`` under whatever directory the process ran in."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    monkeypatch.chdir(tmp_path / "tmp")
    location = "postgresql://nexus@127.0.0.1:5432/ledger"
    saved = _rescue.RescuedTurn("01TURN", "s", "aborted", [reply("cut sh")], "aborted", "stopped")
    path = _rescue.save(location, saved)
    assert path is not None and path.parent.parent == tmp_path / "tmp" / f"nexus-rescued-{os.getuid()}"
    assert _rescue.find(location, "01TURN") == path  # the next start finds it by the same URL
    assert _rescue.find("postgresql://nexus@127.0.0.1:5432/other", "01TURN") is None
    assert not (tmp_path / "tmp" / "postgresql:").exists()
