"""A pi export/import round trip keeps every turn's status (issue 8 item 16: ``aborted`` came back ``completed``)."""

from __future__ import annotations

import json
from pathlib import Path

from nexus.ledger import Ledger, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.pi_jsonl import TURN_STATUS_TYPE, export_pi_session
from nexus.testing.conformance.support import reply, user


def _statuses(ledger: Ledger, label: str) -> list[tuple[str, str | None, object]]:
    return [(t.status, t.stop_reason, t.error) for t in run_inline(ledger.turns.path(label))]


def _write_mixed_session(ledger: Ledger) -> None:
    run_inline(ledger.sessions.create(NewSession("s")))
    run_inline(ledger.turns.write(TurnWrite("s", None, query_messages=[user("q1")], response_messages=[reply("a1")])))
    error = {"kind": "unknown", "message": "the process stopped", "retryable": True}
    run_inline(
        ledger.turns.write(
            TurnWrite(
                "s",
                None,
                query_messages=[user("q2")],
                response_messages=[reply("half an answ")],
                status="aborted",
                stop_reason="aborted",
                error=error,
            )
        )
    )
    run_inline(
        ledger.turns.write(
            TurnWrite(
                "s",
                None,
                query_messages=[user("q3")],
                status="failed",
                stop_reason="error",
                error={"kind": "rate_limit", "message": "429", "retryable": True},
            )
        )
    )
    run_inline(ledger.turns.write(TurnWrite("s", None, query_messages=[user("q4")], response_messages=[reply("a4")])))


def test_export_then_import_keeps_aborted_and_failed_turns(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        _write_mixed_session(ledger)
        before = _statuses(ledger, "s")
        out = export_pi_session(ledger, "s", tmp_path / "s.jsonl")
        run_inline(ledger.pi.import_pi(out, "back"))
        after = _statuses(ledger, "back")
        assert [m.text for m in run_inline(ledger.turns.history("back")) if hasattr(m, "text")] == [
            m.text for m in run_inline(ledger.turns.history("s")) if hasattr(m, "text")
        ]
    assert [s for s, _, _ in before] == ["completed", "aborted", "failed", "completed"]
    assert after == before
    # a second round trip writes the same file (the status entry is not kept twice)
    with Ledger.open(tmp_path / "a.db") as ledger:
        again = export_pi_session(ledger, "back", tmp_path / "again.jsonl")
    kinds = [json.loads(line).get("customType") for line in again.read_text().splitlines()]
    assert kinds.count(TURN_STATUS_TYPE) == 2


def test_completed_sessions_export_no_status_entries(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q1")], response_messages=[reply("a1")]))
        )
        out = export_pi_session(ledger, "s", tmp_path / "s.jsonl")
    assert TURN_STATUS_TYPE not in out.read_text()


def test_a_bad_status_entry_imports_as_completed(tmp_path: Path) -> None:
    """An entry a user edited to an unknown status does not make an open turn or fail the import."""
    with Ledger.open(tmp_path / "a.db") as ledger:
        _write_mixed_session(ledger)
        out = export_pi_session(ledger, "s", tmp_path / "s.jsonl")
        text = out.read_text().replace('"status":"aborted"', '"status":"streaming"')
        edited = tmp_path / "edited.jsonl"
        edited.write_text(text)
        run_inline(ledger.pi.import_pi(edited, "edited"))
        statuses = [s for s, _, _ in _statuses(ledger, "edited")]
    assert statuses == ["completed", "completed", "failed", "completed"]
