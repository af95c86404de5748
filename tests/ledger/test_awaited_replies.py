"""Schema 10: messages waiting for the reply their sender asked for later are flagged and indexed.

A broker's start answers delivered asks whose reply was never queued (a crash between the turn and
the reply). It used to find them by walking every queue item ever accepted; now it reads an index
that holds only the asks still waiting.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._migrate import migrate
from nexus.ledger._schema import SCHEMA_VERSION
from nexus.ledger.broker_store import REPLY_SUFFIX, BrokerStore


def _accept(store: BrokerStore, message_id: str, reply_to: str | None = None) -> str:
    metadata = {"reply_to": reply_to} if reply_to else {}
    item, _ = store.accept(
        agent_id="worker", session_label="agent:worker", message_id=message_id, sender="manager",
        message={"content": "task", "metadata": metadata}, mode="followup",
    )  # fmt: skip
    return item.id


def _awaiting(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT message_id FROM queue_items INDEXED BY queue_items_awaiting_reply WHERE awaits_reply = 1 ORDER BY 1"
    )
    return [str(row[0]) for row in rows]


def test_an_ask_waits_in_the_index_until_its_reply_is_accepted(store: BrokerStore) -> None:
    ask = _accept(store, "ask-1", reply_to="manager")
    store.deliver([_accept(store, "plain-1")], "turn-0")
    store.deliver([ask], "turn-1")
    assert _awaiting(store.database.connection) == ["ask-1"]
    assert [(item.id, asker) for item, asker in store.unanswered_replies()] == [(ask, "manager")]
    _accept(store, "ask-1" + REPLY_SUFFIX)
    assert _awaiting(store.database.connection) == []
    assert store.unanswered_replies() == []


def test_the_start_up_search_reads_only_the_waiting_asks(store: BrokerStore) -> None:
    for n in range(50):
        store.deliver([_accept(store, f"plain-{n}")], f"turn-{n}")
    conn = store.database.connection
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    store.unanswered_replies()
    conn.set_trace_callback(None)
    sql = next(s for s in statements if s.startswith("SELECT"))
    plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    assert "USING INDEX queue_items_awaiting_reply" in plan, plan
    assert "SCAN q" not in plan.replace("SCAN q USING INDEX", "")  # no walk of the whole table


def test_a_version_9_file_flags_its_unanswered_asks(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=9)
    conn.execute("INSERT INTO sessions (label, origin, created_at, updated_at) VALUES ('agent:w', 'user', 1, 1)")
    rows = [
        ("answered", '{"metadata": {"reply_to": "boss"}}', "delivered"),
        ("answered" + REPLY_SUFFIX, '{"metadata": {"kind": "worker_result"}}', "queued"),
        ("unanswered", '{"metadata": {"reply_to": "boss"}}', "delivered"),
        ("still-queued", '{"metadata": {"reply_to": "boss"}}', "queued"),
        ("plain", '{"content": "x"}', "delivered"),
        ("damaged", '{"metadata": {"reply_to": ', "delivered"),  # not JSON: must not stop the migration
    ]
    for n, (message_id, body, status) in enumerate(rows):
        conn.execute(
            "INSERT INTO queue_items (id, session_label, agent_id, message_id, sender, message_json, mode, status,"
            " attempts, enqueued_at) VALUES (?, 'agent:w', 'w', ?, 'boss', ?, 'followup', ?, 1, ?)",
            (f"item-{n}", message_id, body, status, 100 + n),
        )
    conn.close()
    with Ledger.open(path) as ledger:
        conn = ledger.database.connection
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert _awaiting(conn) == ["still-queued", "unanswered"]
        found = BrokerStore(ledger.database).unanswered_replies()
        assert [(item.message_id, asker) for item, asker in found] == [("unanswered", "boss")]
