"""The reduced fault test (issue 22 §5, CI size): three broker processes on one PostgreSQL database, their
sessions in every queue mode, one SIGKILLed at random every second or so and started again, then a
total-queue check.

Lost 0, duplicated 0 (in the ledger and in the runs' own events), one chain per session with its messages
in the order sent, no two runs of one session overlapping (in time, and each epoch's items claimed by one
process, epochs never going back), no item tried more than 3 times. The full-size run (5,000 messages over
100 agents, ``pg_terminate_backend``, a server crash-restart) is ``bench/fault_postgres.py``, on the same
processes and checks (``nexus.testing.faults``); its results are in docs/scaling.md.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator

import pytest
from lease_procs import Worker, all_finished, check_ledger, check_runs, fill

from nexus.testing.faults import QUEUE_MODES

AGENTS = 12
PER_AGENT = 8
TTL_MS = 1000
KILLS = 6


@pytest.fixture
def brokers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.proc.poll() is None:
            worker.kill()


def test_three_brokers_under_random_sigkills_lose_nothing_and_run_nothing_twice(
    postgres_url: str, brokers: list[Worker]
) -> None:
    rng = random.Random(22)
    asyncio.run(fill(postgres_url, AGENTS, PER_AGENT, QUEUE_MODES))
    everyone: list[Worker] = []
    brokers.extend(Worker(postgres_url, TTL_MS, run_s=0.15) for _ in range(3))
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.5, 1.5))
        victim = rng.randrange(3)
        brokers[victim].kill()  # SIGKILL at a random moment: mid-run, mid-claim, mid-write, idle
        everyone.append(brokers[victim])
        brokers[victim] = Worker(postgres_url, TTL_MS, run_s=0.15)  # and started again
    all_finished(postgres_url, timeout_s=180)
    for broker in brokers:
        _, err = broker.stop()
        assert "Traceback" not in err, err
    counts = check_ledger(postgres_url, AGENTS * PER_AGENT, failed_ok=True)
    assert counts["delivered"] + counts["failed"] == AGENTS * PER_AGENT
    check_runs([*everyone, *brokers])  # no message completed twice, no overlapping runs
