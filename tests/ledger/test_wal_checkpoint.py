"""WAL checkpoints on their own thread: the writer's commits never copy pages back themselves."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._checkpoint import BACKSTOP_PAGES, DEFAULT_PAGES, WalCheckpointer, background_checkpoints


def _write_pages(ledger: Ledger, transactions: int) -> None:
    for n in range(transactions):
        ledger.database.write(
            lambda c, n=n: c.execute(
                "INSERT INTO queue_items (id, session_label, message_json, mode, status, enqueued_at)"
                " VALUES (?, 'agent:w', ?, 'followup', 'queued', 0)",
                (f"item-{n}", '"' + "x" * 3000 + '"'),
            )
        )


def _copied(directory: Path, size_before: int) -> bool:
    """The ~200 pages are in the database file itself, not only in its WAL."""
    return os.path.getsize(directory / "agents.db") > size_before + 150 * 4096


def _autocheckpoint(ledger: Ledger) -> int:
    return int(ledger.database.connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_the_thread_checkpoints_what_commits_leave_in_the_wal(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ledger.ensure_session("agent:w")
        size_before = os.path.getsize(tmp_path / "agents.db")
        with background_checkpoints(ledger.database) as checkpointer:
            assert _autocheckpoint(ledger) == BACKSTOP_PAGES
            _write_pages(ledger, 200)  # ~200 pages: under every threshold, so no commit checkpoints them
            deadline = time.monotonic() + 10
            while not _copied(tmp_path, size_before) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _copied(tmp_path, size_before) and checkpointer.checkpoints >= 1
        assert _autocheckpoint(ledger) == DEFAULT_PAGES
        assert ledger.database.connection.execute("SELECT COUNT(*) FROM queue_items").fetchone()[0] == 200


def test_an_in_memory_ledger_needs_no_thread() -> None:
    with Ledger.open(":memory:") as ledger:
        checkpointer = WalCheckpointer(ledger.database)
        checkpointer.start()
        checkpointer.stop()
        assert checkpointer.checkpoints == 0
