"""A PostgreSQL server with no connection slot free is waited for, not called a wrong URL.

A stranger's trial: a hundred ``nexus send`` at once against one server found its ``max_connections`` taken
(each nexus process holds connections of its own); half of them failed at once with exit 2 and "check the URL,
that PostgreSQL runs there and accepts this user", though the URL was right and a moment later a slot was free.
A role's ``CONNECTION LIMIT`` gives the same refusal (SQLSTATE 53300) without crowding the shared test server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def crowded(postgres_url: str) -> Iterator[tuple[str, str]]:
    """``(role, url)``: a role that may read the test's ledger but has no connection slot (``CONNECTION LIMIT 0``)."""
    role = f"crowded_{uuid.uuid4().hex[:8]}"
    owner = urlsplit(postgres_url).username or "nexus"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0 IN ROLE "{owner}"')
    parts = urlsplit(postgres_url)
    yield role, urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def _db_check(url: str, wait_s: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "NEXUS_DB_WAIT_S": wait_s}
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", "db", "check", "--database", url], capture_output=True, text=True, env=env
    )


def test_a_server_with_no_slot_free_past_the_wait_is_busy_not_a_wrong_url(crowded: tuple[str, str]) -> None:
    _, url = crowded
    done = _db_check(url, "0.5")
    assert done.returncode == 1, done.stderr  # try again later: not exit 2, a bad argument or setup
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, line
    assert "had no connection free" in line and "max_connections" in line and "NEXUS_DB_WAIT_S" in line, line
    assert "check the URL" not in line


def test_a_slot_that_comes_free_within_the_wait_is_taken(postgres_url: str, crowded: tuple[str, str]) -> None:
    role, url = crowded
    freed = threading.Event()

    def free_a_slot() -> None:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
        freed.set()

    timer = threading.Timer(1.0, free_a_slot)
    timer.start()
    try:
        done = _db_check(url, "60")
    finally:
        timer.join()
    assert freed.is_set()
    assert done.returncode == 0, done.stderr
    assert ": ok (the server answers)" in done.stdout, done.stdout
