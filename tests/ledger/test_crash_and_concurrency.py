"""Real processes: SIGKILL mid-turn and mid-write, two writers on one file, racing writers on one session."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nexus.ledger import HeadMovedError, Ledger, NewSession, TurnWrite
from nexus.ledger._schema import MAX_ORDINAL, pack_key
from nexus.ledger._sql_db import run_inline
from nexus.testing.conformance.support import reply, user

WORKER = str(Path(__file__).with_name("ledger_worker.py"))


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, WORKER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _assert_consistent(path: Path) -> tuple[int, int]:
    """integrity_check passes and every turn is whole: closed with all its rows, or open. Returns (closed, open)."""
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    closed = opened = 0
    for tid, seg, seq, status, mcount, tcount in conn.execute(
        "SELECT id, segment_id, seq, status, message_count, tool_call_count FROM turns"
    ).fetchall():
        lo, hi = pack_key(seg, seq, 0), pack_key(seg, seq, MAX_ORDINAL)
        msgs = conn.execute("SELECT COUNT(*) FROM messages WHERE key BETWEEN ? AND ?", (lo, hi)).fetchone()[0]
        calls = conn.execute("SELECT COUNT(*) FROM tool_calls WHERE key BETWEEN ? AND ?", (lo, hi)).fetchone()[0]
        journal = conn.execute("SELECT COUNT(*) FROM turn_journal WHERE turn_id = ?", (tid,)).fetchone()[0]
        if status in ("pending", "streaming"):
            opened += 1
            assert calls == 0 and msgs == mcount  # only the query so far, never a half response
        else:
            closed += 1
            assert (msgs, calls, journal) == (mcount, tcount, 0), tid
    for label, head in conn.execute("SELECT label, thread_id FROM sessions WHERE thread_id IS NOT NULL"):
        last = conn.execute(
            "SELECT thread_id FROM session_history WHERE session_label = ? ORDER BY id DESC LIMIT 1", (label,)
        ).fetchone()[0]
        assert last == head  # every pointer move is logged
        assert conn.execute("SELECT status FROM turns WHERE id = ?", (head,)).fetchone()[0] != "streaming"
    conn.close()
    return closed, opened


def test_sigkill_between_open_and_write_is_recovered_as_aborted(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with Ledger.open(db) as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        base = run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("before")], response_messages=[reply("ok")]))
        )
    proc = _spawn("open-and-hang", str(db), "s")
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[0] == "ready", proc.stderr.read() if proc.stderr else ""
    turn_id = line[1]
    _kill(proc)
    with Ledger.open(db) as ledger:
        assert run_inline(ledger.sessions.head("s")).id == base  # type: ignore[union-attr]
        assert [t.id for t in run_inline(ledger.turns.open_turns())] == [turn_id]
        assert run_inline(ledger.turns.recover()) == [turn_id]  # the owner pid is dead, so no force needed
        turn = run_inline(ledger.turns.get(turn_id))
        assert turn.status == "aborted" and turn.tool_call_count == 2
        assert run_inline(ledger.sessions.head("s")).id == turn_id  # type: ignore[union-attr]
        assert [c.call_id for c in run_inline(ledger.turns.tool_calls(turn_id))] == ["c0", "c1"]
        assert (
            len(run_inline(ledger.turns.history("s"))) == 2 + 1 + 1 + 2
        )  # before/ok, query, synthetic call msg, 2 results
    _assert_consistent(db)


def test_recover_leaves_turns_of_live_processes_alone(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with Ledger.open(db) as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
    proc = _spawn("open-and-hang", str(db), "s")
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        with Ledger.open(db) as ledger:
            assert run_inline(ledger.turns.recover()) == []
            assert len(run_inline(ledger.turns.open_turns())) == 1
    finally:
        _kill(proc)


@pytest.mark.slow
def test_sigkill_inside_write_turn_never_leaves_a_half_turn(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with Ledger.open(db) as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
    rng = random.Random(3)
    written = 0
    killed_while_writing = 0
    for _ in range(20):
        proc = _spawn("write-loop", str(db), "s", "400000")  # ~800 KB per turn: the write takes a while
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 4)):
            if not proc.stdout.readline():
                break
        time.sleep(rng.random() * 0.03)
        _kill(proc)
        tail = proc.stdout.read().split()
        killed_while_writing += bool(tail) and tail[-1] == "writing"
        closed, opened = _assert_consistent(db)
        assert opened <= 1
        with Ledger.open(db) as ledger:
            run_inline(ledger.turns.recover())
        closed_after, opened_after = _assert_consistent(db)
        assert opened_after == 0 and closed_after == closed + opened
        assert closed_after > written
        written = closed_after
    assert killed_while_writing >= 1  # the kills did land inside write_turn
    with Ledger.open(db) as ledger:
        assert len(run_inline(ledger.turns.path("s"))) == written  # one linear session: recovered turns became heads


def test_two_processes_write_one_file_without_lock_errors(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with Ledger.open(db) as ledger:
        run_inline(ledger.sessions.create(NewSession("a")))
        run_inline(ledger.sessions.create(NewSession("b")))
    count = 300
    procs = [_spawn("writer", str(db), label, str(count)) for label in ("a", "b")]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == f"done {count}"
        assert "locked" not in err
    with Ledger.open(db) as ledger:
        assert len(run_inline(ledger.turns.path("a"))) == count and len(run_inline(ledger.turns.path("b"))) == count
    _assert_consistent(db)


def test_racing_processes_on_one_session_never_fork_it(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with Ledger.open(db) as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
    count = 150
    procs = [_spawn("racer", str(db), "s", str(count)) for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.split()[:2] == ["done", str(count)]
    with Ledger.open(db) as ledger:
        turns = run_inline(ledger.turns.path("s"))
        assert len(turns) == 2 * count  # every write landed on the head it read: one straight line
        all_turns = ledger.database.connection.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
        assert all_turns == 2 * count  # no stray branch was written
    _assert_consistent(db)


def test_racing_threads_loser_gets_head_moved(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        base = run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q")], response_messages=[reply("a")]))
        )
        barrier = threading.Barrier(8)
        outcomes: list[str] = []

        def run(i: int) -> None:
            barrier.wait()
            try:
                run_inline(
                    ledger.turns.write(
                        TurnWrite(
                            "s",
                            None,
                            query_messages=[user(f"t{i}")],
                            response_messages=[reply("x")],
                            parent_turn_id=base,
                        )
                    )
                )
                outcomes.append("won")
            except HeadMovedError:
                outcomes.append("lost")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["lost"] * 7 + ["won"]
        assert len(run_inline(ledger.turns.children(base))) == 1
