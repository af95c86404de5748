"""Two broker processes on one database under session leases: a killed or paused broker's session is run
by the other, nothing lost, nothing run twice, and the paused one writes nothing once it wakes.

Real processes and signals (``lease_worker.py``), on SQLite (one file) and PostgreSQL. Runs are
scripted (each takes a moment, then writes its turn consuming its items, as the engine does).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.ledger import AcceptRequest, Ledger

WORKER = Path(__file__).with_name("lease_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"
TTL_MS = 1500
AGENTS = 3
PER_AGENT = 4


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One shared ledger database: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "agents.db")
    return str(request.getfixturevalue("postgres_url"))


async def _fill(target: str) -> None:
    async with await Ledger.connect(target) as ledger:
        for a in range(AGENTS):
            await ledger.agents.save(f"a{a}", role="worker", session_label=f"agent:a{a}", spec={})
        for n in range(PER_AGENT):
            for a in range(AGENTS):
                message = {"id": f"a{a}-m{n}", "from": "user", "to": f"a{a}", "content": f"a{a}-m{n}"}
                await ledger.queue.accept(AcceptRequest(f"a{a}", f"agent:a{a}", f"a{a}-m{n}", "user", message,
                                                        "followup"))  # fmt: skip


class Worker:
    """One broker process; its stdout lines are read as they come."""

    def __init__(self, target: str, run_s: float) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), target, str(TTL_MS), str(run_s)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.strip() == "ready", (first, self.proc.stderr.read() if self.proc.stderr else "")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> tuple[list[dict[str, Any]], str]:
        """End it (if it still runs) and return its run events and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        out, err = self.proc.communicate(timeout=60)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.communicate(timeout=30)


def _rows(target: str, sql: str) -> list[tuple[Any, ...]]:
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:
            return list(conn.execute(sql).fetchall())
    with sqlite3.connect(target) as conn:
        return list(conn.execute(sql).fetchall())


def _wait_for(target: str, sql: str, what: str, timeout_s: float = 60) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = _rows(target, sql)
        if rows:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _running_in(target: str, pid: int) -> str:
    """The id of an item the broker ``pid`` runs now (waited for)."""
    rows = _wait_for(
        target,
        f"SELECT id FROM queue_items WHERE status = 'processing' AND claimed_by LIKE '%:{pid} %'",
        f"process {pid} runs an item",
    )
    return str(rows[0][0])


def _all_delivered(target: str) -> None:
    _wait_for(target, "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM queue_items WHERE status <> 'delivered')",
              "every message delivered", timeout_s=120)  # fmt: skip


def _check_ledger(target: str) -> None:
    """Total-queue check: every message delivered by exactly one completed turn, in order, one chain per session
    and nothing else on it (a stale run's turn would be), epochs never going back along it, at most 3 attempts."""
    items = _rows(target, "SELECT id, session_label, status, attempts, turn_id, claim_epoch, enqueued_at, message_id"
                          " FROM queue_items ORDER BY enqueued_at, id")  # fmt: skip
    assert len(items) == AGENTS * PER_AGENT and all(row[2] == "delivered" for row in items), items
    assert all(row[3] <= 3 for row in items)
    turns = {row[0]: row for row in _rows(target, "SELECT id, session_label, status, parent_turn_id FROM turns")}
    for a in range(AGENTS):
        label = f"agent:a{a}"
        mine = [row for row in items if row[1] == label]
        by_turn = {row[4] for row in mine}
        assert len(by_turn) == len(mine)  # followups: one completed turn each, none shared
        assert all(turns[t][2] == "completed" for t in by_turn)
        chain = _chain(target, label, turns)
        assert chain == [row[4] for row in mine]  # one completed turn each, in the order sent, on one chain
        session_turns = [t for t, row in turns.items() if row[1] == label and row[2] != "streaming"]
        assert sorted(session_turns) == sorted(chain)  # no side branch: every closed turn is on the chain
        epochs = [row[5] for row in mine]
        assert all(e is not None for e in epochs) and epochs == sorted(epochs)


def _chain(target: str, label: str, turns: dict[str, tuple[Any, ...]]) -> list[str]:
    head = _rows(target, f"SELECT thread_id FROM sessions WHERE label = '{label}'")[0][0]
    chain: list[str] = []
    while head is not None:
        chain.append(head)
        head = turns[head][3]
    return chain[::-1]


def test_a_killed_broker_s_session_is_run_by_the_other_nothing_lost_nothing_twice(
    target: str, workers: list[Worker]
) -> None:
    asyncio.run(_fill(target))
    workers.append(Worker(target, run_s=3.0))
    workers.append(Worker(target, run_s=0.2))
    victim = workers[0]
    cut = _running_in(target, victim.pid)  # a run is under way in the first broker
    victim.proc.kill()  # SIGKILL mid-run: its lease is never released
    victim.proc.communicate(timeout=30)
    _all_delivered(target)
    events, err = workers[1].stop()
    assert "Traceback" not in err, err
    _check_ledger(target)
    (attempts, claimed_by), *_ = _rows(target, f"SELECT attempts, claimed_by FROM queue_items WHERE id = '{cut}'")
    assert attempts == 2 and f":{workers[1].pid} " in claimed_by  # the cut item ran again, in the other broker
    assert any(cut in event["items"] for event in events if event.get("outcome") == "completed")


def test_a_paused_broker_loses_its_lease_and_writes_nothing_when_it_wakes(target: str, workers: list[Worker]) -> None:
    asyncio.run(_fill(target))
    workers.append(Worker(target, run_s=2.0))
    paused = workers[0]
    cut = _running_in(target, paused.pid)
    paused.proc.send_signal(signal.SIGSTOP)  # a pause longer than the lease (a GC, a VM stall, a partition)
    workers.append(Worker(target, run_s=0.2))
    _wait_for(target, f"SELECT 1 FROM queue_items WHERE id = '{cut}' AND status = 'delivered'",
              "the other broker ran the paused one's item")  # fmt: skip
    paused.proc.send_signal(signal.SIGCONT)  # it wakes mid-run, still believing it holds the session
    _all_delivered(target)
    time.sleep(TTL_MS / 1000)  # let the woken run end (its renewal or its write finds the lease lost)
    stale, err = paused.stop()
    _, other_err = workers[1].stop()
    assert "Traceback" not in other_err, other_err
    _check_ledger(target)
    ends = [event for event in stale if event["event"] == "end" and cut in event["items"]]
    assert ends and all(event["outcome"] == "LeaseLostError" for event in ends), ([e["outcome"] for e in ends], err)
    assert "lease" in err and "lost" in err
