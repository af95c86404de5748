"""Broker processes under session leases on one shared database, and the total-queue check of what they did.

For ``test_lease_processes.py`` and ``test_lease_faults.py``: :class:`Worker` runs ``lease_worker.py`` (an
``AgentBroker`` under leases, runs scripted); :func:`check_ledger` is the Jepsen-style check of the queue
afterwards, read straight from the database.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from nexus.ledger import AcceptRequest, Ledger

WORKER = Path(__file__).with_name("lease_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"


async def fill(target: str, agents: int, per_agent: int) -> None:
    """Register ``agents`` agents and queue ``per_agent`` followups to each (interleaved, in order)."""
    async with await Ledger.connect(target) as ledger:
        for a in range(agents):
            await ledger.agents.save(f"a{a}", role="worker", session_label=f"agent:a{a}", spec={})
        for n in range(per_agent):
            for a in range(agents):
                message = {"id": f"a{a}-m{n}", "from": "user", "to": f"a{a}", "content": f"a{a}-m{n}"}
                request = AcceptRequest(f"a{a}", f"agent:a{a}", f"a{a}-m{n}", "user", message, "followup")
                await ledger.queue.accept(request)


class Worker:
    """One broker process (``lease_worker.py``); waits for its ``ready``."""

    def __init__(self, target: str, ttl_ms: int, run_s: float) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), target, str(ttl_ms), str(run_s)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.strip() == "ready", (first, self.proc.stderr.read() if self.proc.stderr else "")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL, reaped."""
        self.proc.kill()
        self.proc.communicate(timeout=30)

    def stop(self) -> tuple[list[dict[str, Any]], str]:
        """End it (if it still runs) and return its run events and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        out, err = self.proc.communicate(timeout=60)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def rows(target: str, sql: str) -> list[tuple[Any, ...]]:
    """A query's rows, read straight from the database (SQLite file or PostgreSQL URL)."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:
            return list(conn.execute(sql).fetchall())
    with sqlite3.connect(target) as conn:
        return list(conn.execute(sql).fetchall())


def wait_for(target: str, sql: str, what: str, timeout_s: float = 60) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` once there are any (polled)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = rows(target, sql)
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def running_in(target: str, pid: int) -> str:
    """The id of an item the broker ``pid`` runs now (waited for)."""
    found = wait_for(
        target,
        f"SELECT id FROM queue_items WHERE status = 'processing' AND claimed_by LIKE '%:{pid} %'",
        f"process {pid} runs an item",
    )
    return str(found[0][0])


def all_finished(target: str, timeout_s: float = 120) -> None:
    """Wait until no queue item is waiting or running."""
    wait_for(target, "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM queue_items WHERE status IN ('queued', 'processing'))",
             "every message finished", timeout_s)  # fmt: skip


def check_ledger(target: str, expected: int, *, failed_ok: bool = False) -> dict[str, int]:
    """The total-queue check; returns its counts.

    Lost 0 (every message delivered, or failed after 3 cut runs when ``failed_ok``), duplicated 0 (one
    completed turn per delivered followup, none shared), per session one chain holding exactly its
    delivered turns in the order sent (no fork, no stale turn), epochs never going back along it and
    each epoch's items claimed by one process (no two runs of a session overlapping), attempts <= 3.
    """
    items = rows(target, "SELECT id, session_label, status, attempts, turn_id, claim_epoch, claimed_by, error"
                         " FROM queue_items ORDER BY enqueued_at, id")  # fmt: skip
    assert len(items) == expected, f"lost at accept: {expected - len(items)}"
    lost = [row for row in items if row[2] != "delivered" and not (failed_ok and row[2] == "failed" and row[3] >= 3)]
    assert lost == [], f"lost: {lost}"
    assert all(row[3] <= 3 for row in items), "an item was tried more than 3 times"
    turns = {row[0]: row for row in rows(target, "SELECT id, session_label, status, parent_turn_id FROM turns")}
    holders: dict[tuple[str, int], set[str]] = defaultdict(set)
    for label in sorted({row[1] for row in items}):
        delivered = [row for row in items if row[1] == label and row[2] == "delivered"]
        assert len({row[4] for row in delivered}) == len(delivered), f"{label}: two messages in one turn"
        chain = _chain(target, label, turns)
        assert chain == [row[4] for row in delivered], f"{label}: the chain is not the delivered turns in order"
        assert all(turns[t][2] == "completed" for t in chain)
        closed = [t for t, row in turns.items() if row[1] == label and row[2] != "streaming"]
        assert sorted(closed) == sorted(chain), f"{label}: a turn off the chain (a fork or a stale write)"
        epochs = [int(row[5]) for row in delivered]
        assert epochs == sorted(epochs), f"{label}: epochs went back along the chain: {epochs}"
        for row in delivered:
            holders[(label, int(row[5]))].add(str(row[6]))
    overlapping = {key: who for key, who in holders.items() if len(who) > 1}
    assert overlapping == {}, f"one epoch, two processes: {overlapping}"
    return {
        "delivered": sum(row[2] == "delivered" for row in items),
        "failed": sum(row[2] == "failed" for row in items),
        "epochs": len(holders),
    }


def _chain(target: str, label: str, turns: dict[str, tuple[Any, ...]]) -> list[str]:
    head = rows(target, f"SELECT thread_id FROM sessions WHERE label = '{label}'")[0][0]
    chain: list[str] = []
    while head is not None:
        chain.append(head)
        head = turns[head][3]
    return chain[::-1]
