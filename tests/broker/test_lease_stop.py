"""A broker process stopped (SIGTERM) while PostgreSQL cannot be reached exits in bounded time, losing nothing.

The fault bench met a broker that had not exited 60 s after SIGTERM. Reduced: runs under way, then the
broker's connections are ended and its database refuses new ones (as while the server restarts, or a
network cut) and SIGTERM comes. Before, every aborted run's write, hand-back and lease release retried
for ``NEXUS_DB_WAIT_S`` (60 s) apiece, one after another: not exited 300 s later. Now the stop gives the
database 10 s (``Ledger.stopping``). Whatever it could not write stays as it was: once the database is
back, another broker runs every message, each once, in order. Real processes, signals and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from lease_procs import Worker, all_finished, check_ledger, fill, rows, running_in

AGENTS = 6
PER_AGENT = 3
STOP_WAIT_S = 120
"""How long the test waits for the stopped process: far beyond its 10 s bound, far below the old stop."""


@pytest.fixture
def refusing(postgres_server: str, postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An admin connection (to another database) that can make the test's database refuse connections;
    they are allowed again at the end."""
    name = urlsplit(postgres_url).path.lstrip("/")
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        yield admin
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')


def test_a_broker_stopped_while_postgresql_is_away_exits_and_loses_nothing(
    postgres_url: str, refusing: psycopg.Connection[tuple[object, ...]]
) -> None:
    asyncio.run(fill(postgres_url, AGENTS, PER_AGENT, ("followup", "collect", "steer")))
    broker = Worker(postgres_url, 3000, 30.0, env={"PGAPPNAME": "nexus-stop-test"})
    running_in(postgres_url, broker.pid)  # runs under way (each would take 30 s)
    name = urlsplit(postgres_url).path.lstrip("/")
    refusing.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
    ended = refusing.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'nexus-stop-test'"
    ).fetchone()
    assert ended is not None and ended[0] > 0
    broker.proc.terminate()
    try:
        code = broker.proc.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        broker.kill()
        tail = broker.err_path.read_text()[-2000:]
        raise AssertionError(f"not exited {STOP_WAIT_S} s after SIGTERM: {tail}") from None
    err = broker.err_path.read_text()
    assert code == 0 and "Traceback" not in err, err
    refusing.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    statuses = dict(rows(postgres_url, "SELECT status, count(*) FROM queue_items GROUP BY status"))
    assert set(statuses) <= {"queued", "processing"}, statuses  # nothing settled as failed by the stop
    after = Worker(postgres_url, 3000, 0.05)
    try:
        all_finished(postgres_url)
    finally:
        _, after_err = after.stop()
    assert "Traceback" not in after_err, after_err
    check_ledger(postgres_url, AGENTS * PER_AGENT)  # every message once, each session's chain in order
