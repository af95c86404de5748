"""Broker processes under session leases on one shared database, and the total-queue check of what they did.

For the fault tests (``tests/broker/test_lease_*.py``, reduced size) and the full-size fault bench
(``bench/fault_postgres.py``): :class:`BrokerProcess` runs ``python -m nexus.testing.broker_runtime`` (an
``AgentBroker`` under leases, runs scripted), its run events written to a file as they happen (a pipe
nobody reads would block a busy broker); :func:`check_ledger` is the Jepsen-style check of the queue
afterwards, read straight from the database, and :func:`check_runs` the same of the run events.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from nexus.ledger import AcceptRequest, Ledger

SRC = Path(__file__).resolve().parents[2]

QUEUE_MODES = ("followup", "steer", "collect", "steer-backlog", "queue", "interrupt")
"""Every queue mode: agent ``a{i}`` of :func:`requests` gets ``modes[i % len(modes)]``."""


def requests(agents: int, per_agent: int, modes: Sequence[str] = ("followup",)) -> Iterator[AcceptRequest]:
    """``per_agent`` messages to each of ``agents`` agents, interleaved, each agent's in order (``a{a}-m{n}``)."""
    for n in range(per_agent):
        for a in range(agents):
            message = {"id": f"a{a}-m{n}", "from": "user", "to": f"a{a}", "content": f"a{a}-m{n}"}
            yield AcceptRequest(f"a{a}", f"agent:a{a}", f"a{a}-m{n}", "user", message, modes[a % len(modes)])


async def register(ledger: Ledger, agents: int) -> None:
    """Agents ``a0`` .. ``a{agents-1}``, each with its session ``agent:a{i}``."""
    for a in range(agents):
        await ledger.agents.save(f"a{a}", role="worker", session_label=f"agent:a{a}", spec={})


async def fill(target: str, agents: int, per_agent: int, modes: Sequence[str] = ("followup",)) -> None:
    """Register ``agents`` agents and queue ``per_agent`` messages to each (see :func:`requests`)."""
    async with await Ledger.connect(target) as ledger:
        await register(ledger, agents)
        for request in requests(agents, per_agent, modes):
            await ledger.queue.accept(request)


class BrokerProcess:
    """One broker process (``python -m nexus.testing.broker_runtime``); waits for its ``ready``.

    Its stdout (``ready``, then one JSON line per run event) goes to a file in ``logs`` (a fresh temporary
    directory if not given), read by :meth:`events`; ``env`` is added to the process's environment
    (``PGAPPNAME`` names its PostgreSQL connections, for ``pg_terminate_backend``).
    """

    def __init__(
        self, target: str, ttl_ms: int, run_s: float, *args: str, logs: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        folder = logs or _scratch()
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / f"broker-{time.monotonic_ns()}"
        self.out_path, self.err_path = stem.with_suffix(".out"), stem.with_suffix(".err")
        self.killed_at: float | None = None
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nexus.testing.broker_runtime", target, str(ttl_ms), str(run_s), *args],
                env={**os.environ, "PYTHONPATH": str(SRC), **(env or {})}, stdout=out, stderr=err,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not self.out_path.read_text().startswith("ready\n"):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.err_path.read_text()
            time.sleep(0.02)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL, reaped; the time is kept (a run it had under way ended then)."""
        self.killed_at = time.time()
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> tuple[list[dict[str, Any]], str]:
        """End it (if it still runs) and return its run events and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout=60)
        return self.events(), self.err_path.read_text()

    def events(self) -> list[dict[str, Any]]:
        """Its run events so far (a line cut by a kill is left out)."""
        found = []
        for line in self.out_path.read_text().splitlines():
            if line.startswith("{") and line.endswith("}"):
                found.append(json.loads(line))
        return found


_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """One folder per process for the logs of brokers started without ``logs``, removed when it exits."""
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="nexus-broker-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


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
        try:
            found = rows(target, sql)
        except Exception:  # a database restarting: ask again
            found = []
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def all_finished(target: str, timeout_s: float = 120) -> None:
    """Wait until no queue item is waiting or running."""
    wait_for(target, "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM queue_items WHERE status IN ('queued', 'processing'))",
             "every message finished", timeout_s)  # fmt: skip


def check_ledger(target: str, expected: int, *, failed_ok: bool = False, cut_turns_ok: bool = False) -> dict[str, int]:
    """The total-queue check; returns its counts.

    Lost 0 (every message delivered, or failed after 3 cut runs when ``failed_ok``), attempts <= 3, and per
    session one chain holding exactly the turns that consumed its messages, in the order sent (no fork, no
    stale or duplicate turn: a turn on it consumed a message, and every other turn closed there is on it;
    a steer joins the turn running when it came, ahead of a backlog, so the order is the turns' first messages');
    a ``followup`` message has a turn of its own; turns completed (``aborted`` where an ``interrupt`` cut
    them); one lease epoch per turn, epochs never going back along a chain and each epoch's items claimed by
    one process (no two runs of a session overlapping). ``cut_turns_ok``: the engine's runs open their turn
    when they start, so a run a kill cut leaves an ``aborted`` turn that consumed nothing (closed by the
    takeover, kept so the agent sees what it had done): such turns may sit on the chain between the others.
    """
    items = rows(target, "SELECT id, session_label, status, attempts, turn_id, claim_epoch, claimed_by, mode"
                         " FROM queue_items ORDER BY enqueued_at, id")  # fmt: skip
    assert len(items) == expected, f"lost at accept: {expected - len(items)}"
    lost = [row for row in items if row[2] != "delivered" and not (failed_ok and row[2] == "failed" and row[3] >= 3)]
    assert lost == [], f"lost: {lost}"
    assert all(row[3] <= 3 for row in items), "an item was tried more than 3 times"
    turns = {row[0]: row for row in rows(target, "SELECT id, session_label, status, parent_turn_id FROM turns")}
    holders: dict[tuple[str, int], set[str]] = defaultdict(set)
    by_session: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in items:
        by_session[row[1]].append(row)
    for label, session_items in sorted(by_session.items()):
        delivered = [row for row in session_items if row[2] == "delivered"]
        _check_session(target, label, delivered, turns, cut_turns_ok)
        for row in delivered:
            holders[(label, int(row[5]))].add(str(row[6]))
    overlapping = {key: who for key, who in holders.items() if len(who) > 1}
    assert overlapping == {}, f"one epoch, two processes: {overlapping}"
    return {
        "delivered": sum(row[2] == "delivered" for row in items),
        "failed": sum(row[2] == "failed" for row in items),
        "epochs": len(holders),
        "turns": sum(1 for row in turns.values() if row[2] != "streaming"),
    }


def _check_session(
    target: str, label: str, delivered: list[tuple[Any, ...]], turns: dict[str, Any], cut_turns_ok: bool
) -> None:
    """One session's part of :func:`check_ledger` (``delivered``: its delivered items in the order sent)."""
    if all(row[7] == "followup" for row in delivered):
        assert len({row[4] for row in delivered}) == len(delivered), f"{label}: two followups in one turn"
    whole = _chain(target, label, turns)
    consumed = list(dict.fromkeys(row[4] for row in delivered))
    chain = [t for t in whole if t in set(consumed)] if cut_turns_ok else whole
    cut = [t for t in whole if t not in set(chain)]
    assert all(turns[t][2] == "aborted" for t in cut), f"{label}: a turn on the chain consumed nothing: {cut}"
    assert chain == consumed, f"{label}: the chain is not the turns that consumed its messages, in the order sent"
    allowed = {"completed", "aborted"} if any(row[7] == "interrupt" for row in delivered) else {"completed"}
    assert all(turns[t][2] in allowed for t in chain), f"{label}: a turn on the chain ended otherwise"
    closed = [t for t, row in turns.items() if row[1] == label and row[2] != "streaming"]
    assert sorted(closed) == sorted(whole), f"{label}: a turn off the chain (a fork, a stale or a duplicate write)"
    epochs: dict[str, set[int]] = defaultdict(set)  # a steer is claimed under its run's lease: one epoch a turn
    for row in delivered:
        epochs[row[4]].add(int(row[5]))
    assert all(len(found) == 1 for found in epochs.values()), f"{label}: one turn, two lease epochs: {epochs}"
    along = [min(epochs[t]) for t in chain]
    assert along == sorted(along), f"{label}: epochs went back along the chain: {along}"


def _chain(target: str, label: str, turns: dict[str, tuple[Any, ...]]) -> list[str]:
    head = rows(target, f"SELECT thread_id FROM sessions WHERE label = '{label}'")[0][0]
    chain: list[str] = []
    while head is not None:
        chain.append(head)
        head = turns[head][3]
    return chain[::-1]


def check_runs(processes: Sequence[BrokerProcess]) -> dict[str, float]:
    """The run events' side of the check (every process's, killed ones' too); returns its counts.

    Duplicated 0 (no message consumed by two runs that each completed their turn), and no two runs of a
    session that wrote their turn overlapping in time (one clock: the processes share a machine). Also how
    long a killed process's sessions waited to run again: from the kill to the session's next run start
    anywhere (``rerun_max_s``, ``rerun_p99_s``; ``rerun_missing``: such a session that never ran again, its
    cut run having written its turn before the kill: an item left unrun is lost, which :func:`check_ledger` sees).
    Counted too: runs that wrote, runs fenced off (a lost lease: nothing written), steers read, aborted runs.
    """
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    completed: dict[str, int] = defaultdict(int)
    starts: dict[str, list[float]] = defaultdict(list)
    cut: list[tuple[str, float]] = []
    fenced = steered = aborted = 0
    for process in processes:
        open_runs: dict[str, float] = {}
        for event in process.events():
            session = str(event["session"])
            if event["event"] == "start":
                open_runs[session] = float(event["t"])
                starts[session].append(float(event["t"]))
                continue
            began = open_runs.pop(session, float(event["t"]))
            if event.get("outcome") in ("completed", "aborted"):
                runs[session].append((began, float(event["t"])))
            else:
                fenced += 1
            aborted += event.get("outcome") == "aborted"
            if event.get("outcome") == "completed":
                steered += len(event.get("steers", ()))
                for item in event["items"]:
                    completed[str(item)] += 1
        if process.killed_at is not None:
            cut.extend((session, process.killed_at) for session in open_runs)
    duplicated = sorted(item for item, count in completed.items() if count > 1)
    assert duplicated == [], f"duplicated (two completed runs of one message): {duplicated[:10]}"
    for session, spans in runs.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"{session}: two runs overlapped ({start} began before {end})"
    waits = [min((t - killed for t in starts[session] if t > killed), default=-1.0) for session, killed in cut]
    found = sorted(w for w in waits if w >= 0)
    return {
        "runs": float(sum(len(spans) for spans in runs.values())),
        "fenced": float(fenced),
        "steered": float(steered),
        "aborted": float(aborted),
        "cut": float(len(cut)),
        "rerun_missing": float(len(waits) - len(found)),
        "rerun_max_s": found[-1] if found else 0.0,
        "rerun_p99_s": found[min(len(found) - 1, int(len(found) * 0.99))] if found else 0.0,
    }
