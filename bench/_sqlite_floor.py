"""The stdlib-sqlite3 floor of the broker's queue path, and child processes for the broker benchmarks.

The floor is the least any durable queue on SQLite must do per message: the same three steps as the
broker (accept, claim, deliver), each its own committed transaction, on a table with the columns and
indexes of ``queue_items`` (the unique message id, the index of unfinished items), in WAL mode with
``synchronous=NORMAL`` as the ledger runs, from plain ``sqlite3`` with no object built per message.
Two of them: one message per step (what a queue that commits each call does) and batches of 32 (what
grouping commits can reach). A reader on another machine compares the broker with these, measured
in the same run, rather than with a number of ours.

Each measurement runs in a fresh child process (:func:`child`), so every variant and source tree
(``--also-src``) pays its own imports and collector history, in rounds that alternate them.
Standard library only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DDL = """
CREATE TABLE queue_items (
  id TEXT PRIMARY KEY, session_label TEXT NOT NULL, agent_id TEXT, message_id TEXT, sender TEXT,
  message_json TEXT NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'queued',
  attempts INTEGER NOT NULL DEFAULT 0, enqueued_at INTEGER NOT NULL, started_at INTEGER, completed_at INTEGER,
  error TEXT, turn_id TEXT
);
CREATE UNIQUE INDEX queue_items_message ON queue_items(message_id) WHERE message_id IS NOT NULL;
CREATE INDEX queue_items_pending ON queue_items(status, enqueued_at) WHERE status IN ('queued', 'processing');
"""
_INSERT = (
    "INSERT INTO queue_items (id, session_label, agent_id, message_id, sender, message_json, mode, enqueued_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_CLAIM = (
    "UPDATE queue_items SET status = 'processing', attempts = attempts + 1, started_at = ?"
    " WHERE id IN ({}) AND +status = 'queued'"
)
_DELIVER = (
    "UPDATE queue_items SET status = 'delivered', completed_at = ?, turn_id = ?"
    " WHERE id IN ({}) AND +status IN ('queued', 'processing')"
)

BATCH = 32
"""Messages per transaction of the batched floor."""


def floor(path: Path, messages: int, batch: int) -> dict[str, float]:
    """Accept, claim and deliver ``messages`` in transactions of ``batch`` messages each step.

    Returns ``rate`` (messages a second), ``p99`` (ms of one accept transaction) and ``cpu_us``
    (CPU time per message, ``time.process_time``).
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(DDL)
    accept_ms: list[float] = []
    cpu0, start = time.process_time(), time.perf_counter()
    for first in range(0, messages, batch):
        numbers = range(first, min(messages, first + batch))
        ids = [f"item-{n:020d}" for n in numbers]
        now = time.time_ns() // 1_000_000
        t0 = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        for item_id, n in zip(ids, numbers, strict=True):
            body = json.dumps({"content": f"message number {n}", "from": "user"})
            conn.execute(_INSERT, (item_id, "agent:worker", "worker", f"msg-{n}", "user", body, "followup", now))
        conn.execute("COMMIT")
        accept_ms.append((time.perf_counter() - t0) * 1000)
        marks = ", ".join("?" * len(ids))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_CLAIM.format(marks), (now, *ids))
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_DELIVER.format(marks), (now, f"turn-{first}", *ids))
        conn.execute("COMMIT")
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    conn.close()
    accept_ms.sort()
    return {"rate": messages / elapsed, "p99": accept_ms[int(len(accept_ms) * 0.99)], "cpu_us": cpu / messages * 1e6}


def persist_queue(directory: Path, messages: int) -> dict[str, float]:
    """The same three steps on ``persistqueue.SQLiteAckQueue`` (put -> get -> ack), one message at a time."""
    import persistqueue  # type: ignore[import-not-found,import-untyped,unused-ignore]

    queue = persistqueue.SQLiteAckQueue(str(directory / "ackq"), auto_commit=True)
    accept_ms: list[float] = []
    cpu0, start = time.process_time(), time.perf_counter()
    for n in range(messages):
        t0 = time.perf_counter()
        queue.put({"content": f"message number {n}", "from": "user"})
        accept_ms.append((time.perf_counter() - t0) * 1000)
        item = queue.get(block=False)
        queue.ack(item)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    accept_ms.sort()
    return {"rate": messages / elapsed, "p99": accept_ms[int(len(accept_ms) * 0.99)], "cpu_us": cpu / messages * 1e6}


def child(script: str, src: str | None, args: list[str], python: str | None = None) -> dict[str, float]:
    """Run ``script --child ARGS`` in a fresh process (``src`` first on ``PYTHONPATH``); its last line is JSON."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    done = subprocess.run(
        [python or sys.executable, script, "--child", *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ratios(rate: float, cpu_us: float, floors: dict[str, dict[str, float]]) -> str:
    """``x floor`` cells: the row's msg/s over each floor's, and each floor's CPU per message over the row's."""
    cells = []
    for name in ("one per step", f"batches of {BATCH}"):
        found = floors.get(name)
        if found is None:
            cells += ["-", "-"]
            continue
        cells += [f"{rate / found['rate']:.2f}", f"{found['cpu_us'] / cpu_us:.2f}"]
    return " ".join(f"{cell:>8}" for cell in cells)


def _main(argv: list[str]) -> None:
    """``--child floor MESSAGES BATCH`` or ``--child persist-queue MESSAGES 0``: one measurement, as JSON."""
    _, kind, messages, batch = argv
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "floor":
            floor(Path(tmp) / "warm.db", 1000, int(batch))  # page cache, the sqlite3 module's statement cache
            print(json.dumps(floor(Path(tmp) / "floor.db", int(messages), int(batch))))
        else:
            persist_queue(Path(tmp), 500)
            print(json.dumps(persist_queue(Path(tmp) / "measured", int(messages))))


__all__ = ["BATCH", "DDL", "child", "floor", "persist_queue", "ratios"]

if __name__ == "__main__":
    _main(sys.argv[1:])
