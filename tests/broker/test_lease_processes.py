"""Two broker processes on one database under session leases: a killed or paused broker's session is run
by the other, nothing lost, nothing run twice, and the paused one writes nothing once it wakes.

Real processes and signals (``lease_worker.py``), on SQLite (one file) and PostgreSQL. Runs are
scripted (each takes a moment, then writes its turn consuming its items, as the engine does).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lease_procs import (
    Worker,
    accept_range,
    all_finished,
    check_ledger,
    fill,
    register_only,
    rows,
    running_in,
    wait_for,
)

TTL_MS = 1500
AGENTS = 3
PER_AGENT = 4


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One shared ledger database: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "agents.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.proc.poll() is None:
            worker.kill()


def test_a_killed_broker_s_session_is_run_by_the_other_nothing_lost_nothing_twice(
    target: str, workers: list[Worker]
) -> None:
    asyncio.run(fill(target, AGENTS, PER_AGENT))
    workers.append(Worker(target, TTL_MS, run_s=3.0))
    workers.append(Worker(target, TTL_MS, run_s=0.2))
    victim = workers[0]
    cut = running_in(target, victim.pid)  # a run is under way in the first broker
    victim.kill()  # SIGKILL mid-run: its lease is never released
    all_finished(target)
    events, err = workers[1].stop()
    assert "Traceback" not in err, err
    check_ledger(target, AGENTS * PER_AGENT)
    (attempts, claimed_by), *_ = rows(target, f"SELECT attempts, claimed_by FROM queue_items WHERE id = '{cut}'")
    assert attempts == 2 and f":{workers[1].pid} " in claimed_by  # the cut item ran again, in the other broker
    assert any(cut in event["items"] for event in events if event.get("outcome") == "completed")


def test_a_paused_broker_loses_its_lease_and_writes_nothing_when_it_wakes(target: str, workers: list[Worker]) -> None:
    asyncio.run(fill(target, AGENTS, PER_AGENT))
    workers.append(Worker(target, TTL_MS, run_s=2.0))
    paused = workers[0]
    cut = running_in(target, paused.pid)
    paused.proc.send_signal(signal.SIGSTOP)  # a pause longer than the lease (a GC, a VM stall, a partition)
    workers.append(Worker(target, TTL_MS, run_s=0.2))
    wait_for(target, f"SELECT 1 FROM queue_items WHERE id = '{cut}' AND status = 'delivered'",
             "the other broker ran the paused one's item")  # fmt: skip
    paused.proc.send_signal(signal.SIGCONT)  # it wakes mid-run, still believing it holds the session
    all_finished(target)
    _woken_run_ended(paused, cut)  # its renewal or its write finds the lease lost
    stale, err = paused.stop()
    _, other_err = workers[1].stop()
    assert "Traceback" not in other_err, other_err
    check_ledger(target, AGENTS * PER_AGENT)
    ends = [event for event in stale if event["event"] == "end" and cut in event["items"]]
    assert ends and all(event["outcome"] == "LeaseLostError" for event in ends), ([e["outcome"] for e in ends], err)
    assert "lease" in err and "lost" in err


def _woken_run_ended(worker: Worker, cut: str, timeout_s: float = 60) -> None:
    """Wait until ``worker``'s run of ``cut`` has ended and its lost lease was logged (a loaded machine may take
    seconds to schedule the woken process); on timeout the test's assertions say what is missing."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ended = any(event["event"] == "end" and cut in event["items"] for event in worker.events())
        if ended and "lost" in worker.err_path.read_text():
            return
        time.sleep(0.05)


def test_a_takeover_runs_the_dead_holder_s_cut_message_before_later_ones_it_had_adopted(
    postgres_url: str, workers: list[Worker]
) -> None:
    """The second broker polls only (every 2 s): it never sees the first message while it waits (the first
    broker, woken by a notification, claims it at once), but it adopts the later ones. The first is killed
    mid-run: the takeover must run the cut message first (it ran it last, the full-size fault bench found)."""
    asyncio.run(register_only(postgres_url, 1))
    workers.append(Worker(postgres_url, TTL_MS, 0.1, "2000", "poll"))
    workers.append(Worker(postgres_url, TTL_MS, 5.0))
    victim = workers[1]
    asyncio.run(accept_range(postgres_url, 0, 1))
    running_in(postgres_url, victim.pid)
    asyncio.run(accept_range(postgres_url, 1, 4))
    time.sleep(4)  # two of the second broker's polls: it holds messages 1-3, not 0
    victim.kill()
    all_finished(postgres_url)
    _, err = workers[0].stop()
    assert "Traceback" not in err, err
    check_ledger(postgres_url, 4)  # the chain in the order sent
