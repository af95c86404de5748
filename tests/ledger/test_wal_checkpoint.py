"""WAL checkpoints on their own thread: the writer's commits never copy pages back themselves."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from nexus.ledger import Ledger, NewSession
from nexus.ledger._checkpoint import BACKSTOP_PAGES, DEFAULT_PAGES, WalCheckpointer, background_checkpoints
from nexus.ledger._sql_db import run_inline


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
        run_inline(ledger.sessions.ensure(NewSession("agent:w")))
        size_before = os.path.getsize(tmp_path / "agents.db")
        with background_checkpoints(ledger.database) as checkpointer:
            assert _autocheckpoint(ledger) == BACKSTOP_PAGES
            _write_pages(ledger, 200)  # ~200 pages: under every threshold, so no commit checkpoints them
            deadline = time.monotonic() + 10
            # the file grows inside the checkpoint, before the thread counts it: wait for both
            while not (_copied(tmp_path, size_before) and checkpointer.checkpoints) and time.monotonic() < deadline:
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


FRAME_BYTES = 4096 + 24
"""One WAL frame: a page and its header."""


def _small_pages(ledger: Ledger, n: int) -> None:
    ledger.database.write(
        lambda c: c.execute(
            "INSERT INTO queue_items (id, session_label, message_json, mode, status, enqueued_at)"
            " VALUES (?, 'agent:w', '\"x\"', 'followup', 'queued', ?)",
            (f"item-{n}", n),
        )
    )


async def _commit_without_pause(ledger: Ledger, checkpointer: WalCheckpointer, transactions: int) -> None:
    """Commits from the loop back to back (yielding between them, as a busy broker does), far more
    frames than the WAL may hold; then waits for the thread to have asked the loop at least once."""
    for n in range(transactions):
        _small_pages(ledger, n)
        await asyncio.sleep(0)
    deadline, n = time.monotonic() + 10, transactions
    while checkpointer.restarts_asked == 0 and time.monotonic() < deadline:
        _small_pages(ledger, n)
        n += 1
        await asyncio.sleep(0.005)


def test_under_commits_without_pause_the_wal_starts_over_instead_of_growing(tmp_path: Path) -> None:
    """A checkpoint on the thread copies what the WAL held when it began; the loop commits more meanwhile,
    so the WAL never starts over by itself and grew until the backstop made a commit checkpoint it all."""
    transactions = 6000

    async def commit_from_the_loop(ledger: Ledger) -> WalCheckpointer:
        checkpointer = WalCheckpointer(ledger.database, interval_s=0.005, restart_pages=300, backstop_pages=100_000)
        checkpointer.start()  # on the loop: the loop is the one asked to finish
        try:
            await _commit_without_pause(ledger, checkpointer, transactions)
        finally:
            checkpointer.stop()
        return checkpointer

    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:w")))
        checkpointer = asyncio.run(commit_from_the_loop(ledger))
        wal_bytes = os.path.getsize(tmp_path / "agents.db-wal")  # its high-water mark: SQLite never shrinks it
        assert ledger.database.connection.execute("SELECT COUNT(*) FROM queue_items").fetchone()[0] >= transactions
    assert checkpointer.restarts_asked >= 1
    # every commit writes 3.3 frames here: without a restart the WAL holds all of them (20,037 frames when
    # measured); starting over at 300 it peaked at 1,700-2,100 frames on an idle machine, and at 6,043 in a
    # full test run on a machine 3x slower, where the checkpointer thread gets the core less often: the bound
    # is half of what no restart leaves, so only a WAL that never started over (or barely) fails it
    assert wal_bytes < transactions * 3.3 / 2 * FRAME_BYTES


def test_the_loop_is_not_asked_after_the_thread_stopped(tmp_path: Path) -> None:
    async def main() -> None:
        with Ledger.open(tmp_path / "agents.db") as ledger:
            checkpointer = WalCheckpointer(ledger.database, interval_s=60, restart_pages=1)
            checkpointer.start()
            checkpointer.stop()
            checkpointer._finish_on_loop()  # a request that arrived after stop(): nothing runs
            assert checkpointer.restarts_asked == 0
            assert _autocheckpoint(ledger) == DEFAULT_PAGES

    asyncio.run(main())


def test_a_checkpointer_started_again_after_stop_checkpoints_again(tmp_path: Path) -> None:
    """start() after stop(): the thread runs again. Its stop signal stayed set, so the new thread ended
    at once while the writer's own checkpoints stayed raised to the backstop: nobody copied the WAL back."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("agent:w")))
        size_before = os.path.getsize(tmp_path / "agents.db")
        checkpointer = WalCheckpointer(ledger.database, interval_s=0.01)
        checkpointer.start()
        checkpointer.stop()
        checkpointer.start()
        try:
            assert _autocheckpoint(ledger) == BACKSTOP_PAGES
            _write_pages(ledger, 200)
            deadline = time.monotonic() + 10
            while not (_copied(tmp_path, size_before) and checkpointer.checkpoints) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _copied(tmp_path, size_before) and checkpointer.checkpoints >= 1
        finally:
            checkpointer.stop()
        assert _autocheckpoint(ledger) == DEFAULT_PAGES
