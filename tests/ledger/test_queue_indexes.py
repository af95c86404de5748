"""Schema 9: ``queue_items`` indexes its unfinished items only, and old files migrate to it.

Finished items (delivered, failed, dropped) pile up for ever; the start-up reload, the crash
retry and ``queue list --status queued`` must cost what is waiting, not what was ever sent.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger._migrate import migrate
from nexus.ledger._schema import PENDING, SCHEMA_VERSION
from nexus.ledger.broker_store import BrokerStore


def _accept(store: BrokerStore, n: int) -> str:
    item, _ = store.accept(
        agent_id="worker", session_label="agent:worker", message_id=f"m-{n}", sender="user",
        message={"content": f"task {n}"}, mode="followup",
    )  # fmt: skip
    return item.id


def _indexed(conn: sqlite3.Connection, index: str = "queue_items_pending", condition: str = PENDING) -> list[str]:
    """The item ids in a partial index (by default the unfinished ones)."""
    rows = conn.execute(f"SELECT id FROM queue_items INDEXED BY {index} WHERE {condition} ORDER BY id")
    return [str(row[0]) for row in rows]


def test_a_finished_item_leaves_the_pending_index_and_a_failed_one_joins_its_own(store: BrokerStore) -> None:
    queued, claimed, delivered, dropped, failed = (_accept(store, n) for n in range(5))
    store.claim([claimed, delivered, failed])
    store.deliver([delivered], "turn-1")
    store.drop([dropped], "cleared")
    store.fail([failed], "boom")
    assert _indexed(store.database.connection) == sorted([queued, claimed])
    assert _indexed(store.database.connection, "queue_items_failed", "status = 'failed'") == [failed]
    assert [item.id for item in store.pending("worker")] == [queued, claimed]


def test_waiting_and_failed_items_are_read_through_their_indexes(store: BrokerStore) -> None:
    """Each read of unfinished or failed items walks a small index, never the agent's whole history."""
    for n in range(20):
        store.deliver([_accept(store, n)], f"turn-{n}")
    conn = store.database.connection
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    store.pending()
    store.pending("worker")
    store.items(agent_id="worker", statuses=("queued",))
    store.items(statuses=("queued", "processing"))
    store.items(agent_id="worker", statuses=("queued", "processing", "failed"))  # nexus queue list's default
    store.fail_exhausted(3)
    conn.set_trace_callback(None)
    reads = [s for s in statements if s.startswith("SELECT") and "FROM queue_items" in s]
    assert len(reads) == 7  # the default list reads its unfinished and its failed items apart
    for sql in reads:
        plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "USING INDEX queue_items_pending" in plan or "USING INDEX queue_items_failed" in plan, (sql, plan)


def test_an_agents_history_is_listed_without_an_index_of_it(store: BrokerStore) -> None:
    """Schema 11 dropped the per-agent history index (a page write per accept); the listing scans."""
    delivered = [_accept(store, n) for n in range(3)]
    store.deliver(delivered, "turn-1")
    other, _ = store.accept(
        agent_id="other", session_label="agent:worker", message_id="m-other", sender="user",
        message={"content": "x"}, mode="followup",
    )  # fmt: skip
    store.deliver([other.id], "turn-2")
    waiting = _accept(store, 9)
    conn = store.database.connection
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'queue_items'")}
    assert "queue_items_agent" not in names
    assert [i.id for i in store.items(agent_id="worker", statuses=("delivered",))] == delivered
    assert [i.id for i in store.items(agent_id="worker")] == [*delivered, waiting]


def test_a_version_8_file_keeps_its_queue_and_loses_the_status_indexes(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=8)
    conn.execute("INSERT INTO sessions (label, origin, created_at, updated_at) VALUES ('agent:w', 'user', 1, 1)")
    for n, status in enumerate(("delivered", "queued", "processing", "dropped", "queued")):
        conn.execute(
            "INSERT INTO queue_items (id, session_label, agent_id, message_id, sender, message_json, mode, status,"
            " attempts, enqueued_at) VALUES (?, 'agent:w', 'w', ?, 'user', ?, 'followup', ?, ?, ?)",
            (f"item-{n}", f"m-{n}", '{"content": "x"}', status, int(status != "queued"), 100 + n),
        )
    conn.close()
    with Ledger.open(path) as ledger:
        conn = ledger.database.connection
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'queue_items'")}
        assert {"queue_items_pending", "queue_items_failed", "queue_items_message"} <= names
        assert not names & {"queue_items_status", "queue_items_session", "queue_items_agent"}
        store = BrokerStore(ledger.database)
        assert [item.id for item in store.pending()] == ["item-1", "item-2", "item-4"]
        assert [item.id for item in store.items(agent_id="w", statuses=("delivered", "dropped"))] == [
            "item-0",
            "item-3",
        ]
        assert _indexed(conn) == ["item-1", "item-2", "item-4"]


_MIGRATE_AND_DIE = """
import os, signal, sqlite3, sys
from nexus.ledger._migrate import migrate
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL")
steps = [0]
def tick():
    steps[0] += 1
    if steps[0] == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)  # mid-statement: the migration's transaction is open
    return 0
conn.set_progress_handler(tick, 100)
migrate(conn)
print("finished", flush=True)
"""


@pytest.mark.parametrize("ticks", [1, 5, 40])
def test_a_migration_killed_midway_leaves_version_8_whole_and_migrates_on_the_next_open(
    tmp_path: Path, ticks: int
) -> None:
    """SIGKILL while schema 9's indexes are being dropped and built: the file stays a whole version 8
    (its indexes, its queue); the next open migrates it."""
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "agents.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    migrate(conn, target=8)
    conn.execute("INSERT INTO sessions (label, origin, created_at, updated_at) VALUES ('agent:w', 'user', 1, 1)")
    conn.executemany(
        "INSERT INTO queue_items (id, session_label, agent_id, message_id, sender, message_json, mode, status,"
        " attempts, enqueued_at) VALUES (?, 'agent:w', 'w', ?, 'user', '{\"content\": \"x\"}', 'followup', ?, 0, ?)",
        ((f"item-{n:05d}", f"m-{n}", "queued" if n % 10 == 0 else "delivered", n) for n in range(3000)),
    )
    old_indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'queue_items'")}
    conn.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _MIGRATE_AND_DIE, str(path), str(ticks)], env=env, capture_output=True, text=True
    )
    assert done.returncode == -signal.SIGKILL, done.stderr  # killed inside the migration, not after it
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    assert {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'queue_items'")} == (
        old_indexes
    )
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with Ledger.open(path) as ledger:
        assert ledger.database.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [item.id for item in BrokerStore(ledger.database).pending()] == [
            f"item-{n:05d}" for n in range(0, 3000, 10)
        ]


def test_the_default_list_merges_waiting_and_failed_items_oldest_first(store: BrokerStore) -> None:
    first, second, third = (_accept(store, n) for n in range(3))
    store.fail([second], "boom")
    store.claim([third])
    listed = store.items(agent_id="worker", statuses=("queued", "processing", "failed"))
    assert [(item.id, item.status) for item in listed] == [
        (first, "queued"),
        (second, "failed"),
        (third, "processing"),
    ]
    assert [item.id for item in store.items(statuses=("failed",))] == [second]
