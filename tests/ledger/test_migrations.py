"""Files written by earlier schema versions open, migrate and read back exactly what the old code read.

``fixtures/agents-v1.sql`` and ``fixtures/agents-v2.sql`` are ``iterdump`` copies of ledgers
written by the real code of commit 761301c (schema 2, and the same code stopped at schema 1)
with ``fixtures/make_old_ledgers.py``: sessions with aliases, tool calls with caller records,
thinking/image/error messages, a failed turn, a fork, a compaction, a sub-agent with an open
turn and its journal, an archived session and a queue item. ``*.expected.json`` is what the
old code's public API returned for them (:func:`snapshot` below, run under the old code).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nexus.ledger import JournalReply, Ledger, NewSession, QueueItem, TurnDetails, TurnOpen, TurnWrite
from nexus.ledger._schema import SCHEMA_VERSION
from nexus.ledger._sql_db import run_inline
from nexus.llm.serde import message_to_dict
from nexus.llm.types import AssistantMessage, TextContent, ToolResultMessage, UserMessage

FIXTURES = Path(__file__).with_name("fixtures")


def _plain(x: Any) -> Any:
    if isinstance(x, UserMessage | AssistantMessage | ToolResultMessage):
        return message_to_dict(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):  # a turn's ``owner`` is newer than the old code
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name != "owner"}
    if isinstance(x, list | tuple):
        return [_plain(i) for i in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def snapshot(ledger: Ledger, *, with_queue: bool = True) -> dict[str, Any]:
    """Everything the public API reads back from a ledger, as plain JSON values."""
    out: dict[str, Any] = {}
    sessions = run_inline(ledger.sessions.list())
    out["sessions"] = _plain(sessions)
    turn_ids: set[str] = set()
    for s in sessions:
        out["hist:" + s.label] = _plain(run_inline(ledger.turns.history(s.label)))
        turns = run_inline(ledger.turns.path(s.label))
        out["turns:" + s.label] = _plain(turns)
        out["aliases:" + s.label] = run_inline(ledger.sessions.aliases(s.label))
        out["timeline:" + s.label] = _plain(run_inline(ledger.sessions.timeline(s.label)))
        turn_ids |= {t.id for t in turns}
    out["open"] = _plain(run_inline(ledger.turns.open_turns()))
    turn_ids |= {t.id for t in run_inline(ledger.turns.open_turns())}
    for t in sorted(turn_ids):
        out["msgs:" + t] = _plain(run_inline(ledger.turns.messages(t)))
        out["calls:" + t] = _plain(run_inline(ledger.turns.tool_calls(t)))
        out["comp:" + t] = _plain(run_inline(ledger.turns.compaction(t)))
        out["anc:" + t] = run_inline(ledger.turns.ancestry(t))
        out["children:" + t] = _plain(run_inline(ledger.turns.children(t)))
    out["queue"] = [_old_queue_item(item) for item in run_inline(ledger.queue.pending())] if with_queue else "n/a"
    return out


_OLD_QUEUE_FIELDS = ("id", "session_label", "message", "mode", "status", "enqueued_at", "started_at", "completed_at")


def _old_queue_item(item: QueueItem) -> dict[str, Any]:
    """What the old code's queue read returned of an item (its twin type, gone since; ``metadata`` no longer read)."""
    return {name: _plain(getattr(item, name)) for name in (*_OLD_QUEUE_FIELDS, "error", "turn_id")}


def _restore(version: int, path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / f"agents-v{version}.sql").read_text())
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_old_file_migrates_and_reads_back_everything_it_stored(tmp_path: Path, version: int) -> None:
    path = tmp_path / "agents.db"
    _restore(version, path)
    expected = json.loads((FIXTURES / f"agents-v{version}.expected.json").read_text())
    with Ledger.open(path) as ledger:
        assert ledger.database.found_version == version
        got = json.loads(json.dumps(snapshot(ledger)))
        if version == 1:  # the schema-1 code had no queue columns to read; the migrated file has an empty queue
            assert expected.pop("queue") == "n/a" and got.pop("queue") == []
        else:
            for item in expected["queue"]:
                item.pop("metadata")
        assert got.keys() == expected.keys()
        for key in expected:
            assert got[key] == expected[key], key
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_migrated_file_keeps_working(tmp_path: Path, version: int) -> None:
    path = tmp_path / "agents.db"
    _restore(version, path)
    with Ledger.open(path) as ledger:
        (open_turn,) = run_inline(ledger.turns.open_turns())  # the sub-agent's run, left open by the old code
        assert run_inline(ledger.turns.recover(force=True)) == [open_turn.id]
        assert [c.call_id for c in run_inline(ledger.turns.tool_calls(open_turn.id))] == ["j1"]
        assert run_inline(ledger.sessions.head("sub")).id == open_turn.id  # type: ignore[union-attr]
        before = run_inline(ledger.turns.history("main"))
        reply = AssistantMessage([TextContent("new a")], api="anthropic-messages", provider="anthropic", model="m")
        run_inline(
            ledger.turns.write(
                TurnWrite("main", None, query_messages=[UserMessage("new q")], response_messages=[reply])
            )
        )
        after = run_inline(ledger.turns.history("main"))
        assert after[: len(before)] == before and after[len(before) :] == [
            UserMessage("new q", after[-2].timestamp),
            reply,
        ]
        old_turn = run_inline(ledger.turns.path("forked"))[0]
        fork = run_inline(ledger.sessions.create(NewSession(None, origin="fork", head_turn_id=old_turn.id)))
        assert run_inline(ledger.turns.history(fork.label)) == run_inline(ledger.turns.history_at(old_turn.id))
        assert run_inline(ledger.sessions.resolve("al")).label == "main"


@pytest.mark.parametrize("version", [1, 2])
def test_open_turn_of_an_old_file_takes_partial_replies_after_migration(tmp_path: Path, version: int) -> None:
    path = tmp_path / "agents.db"
    _restore(version, path)
    with Ledger.open(path) as ledger:
        (open_turn,) = run_inline(
            ledger.turns.open_turns()
        )  # journaled by the old code: one tool call, no slot column then
        streamed = AssistantMessage([TextContent("the file sa")], api="anthropic-messages", provider="p", model="m")
        run_inline(ledger.turns.journal([JournalReply(open_turn.id, 1, streamed)]))
        run_inline(
            ledger.turns.journal(
                [JournalReply(open_turn.id, 1, replace(streamed, content=[TextContent("the file says jr")]))]
            )
        )
        assert run_inline(ledger.turns.recover(force=True)) == [open_turn.id]
        history = run_inline(ledger.turns.history("sub"))
        assert [m.role for m in history[-4:]] == ["user", "assistant", "tool_result", "assistant"]
        cut = history[-1]
        assert isinstance(cut, AssistantMessage) and cut.text == "the file says jr" and cut.stop_reason == "aborted"
        assert [c.call_id for c in run_inline(ledger.turns.tool_calls(open_turn.id))] == ["j1"]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM turn_journal").fetchone()[0] == 0
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_old_file_gains_the_system_prompts_table_and_engine_turns_are_auditable(tmp_path: Path, version: int) -> None:
    # the schema version after the broker's: system prompts by hash; old turns keep a NULL hash
    path = tmp_path / "agents.db"
    _restore(version, path)
    with Ledger.open(path) as ledger:
        old = run_inline(ledger.turns.path("main"))
        assert old and all(t.system_prompt_hash is None for t in old)
        first = run_inline(
            ledger.turns.open(
                TurnOpen(
                    "main",
                    [UserMessage("q")],
                    TurnDetails(),
                    source="cli",
                    context={"history_messages": 3},
                    system_prompt="You are terse.",
                )
            )
        )
        run_inline(
            ledger.turns.write(TurnWrite("main", first, response_messages=[AssistantMessage([TextContent("a")])]))
        )
        second = run_inline(
            ledger.turns.open(TurnOpen("main", [UserMessage("q2")], TurnDetails(), system_prompt="You are terse."))
        )
        run_inline(
            ledger.turns.write(TurnWrite("main", second, response_messages=[AssistantMessage([TextContent("b")])]))
        )
        turns = {t.id: t for t in run_inline(ledger.turns.path("main"))}
        key = turns[first].system_prompt_hash
        assert key is not None and key == turns[second].system_prompt_hash
        assert run_inline(ledger.turns.system_prompt(key)) == "You are terse."
        query = run_inline(ledger.turns.messages(first))[0]
        assert query.source == "cli" and query.context == {"history_messages": 3}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM system_prompts").fetchone()[0] == 1  # stored once
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_old_file_gains_the_deliveries_table_for_its_old_turns(tmp_path: Path, version: int) -> None:
    # schema 8: where each reply went; an old file has none, and its old turns can get some
    from nexus.ledger.deliveries import DeliveryLog, DeliveryRecord

    path = tmp_path / "agents.db"
    _restore(version, path)
    with Ledger.open(path) as ledger:
        old = run_inline(ledger.turns.path("main"))
        log = DeliveryLog(ledger.database)
        assert log.for_turns([t.id for t in old]) == {} and log.recent() == []
        stored = log.record(
            DeliveryRecord(
                turn_id=old[-1].id, session_label="main", adapter="tg", account_id="bot",
                target={"channel": "tg", "account_id": "bot", "to": "chat:1"}, path="native", status="partial",
                started_at=1, completed_at=2, message_ids=["41", "42"], error="stream process exited", attempts=1,
            )
        )  # fmt: skip
        assert log.for_turn(old[-1].id) == [stored] and stored.id
        assert log.recent(session_label="main") == [stored] and log.recent(session_label="other") == []
        with pytest.raises(sqlite3.IntegrityError):  # a delivery names a real turn (or none)
            log.record(replace(stored, id="", turn_id="no-such-turn"))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT message_ids_json, status FROM deliveries").fetchall() == [('["41","42"]', "partial")]
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
