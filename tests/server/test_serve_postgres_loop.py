"""A slow query on a PostgreSQL ledger holds a worker thread, never the event loop of ``nexus serve``.

The server's agent registry is read synchronously (``BrokerStore``): on PostgreSQL each call waits for the
server. Here a test connection holds ``LOCK TABLE agents`` while a message is sent, so the registry read of
that request waits on the lock; the server must go on answering meanwhile (``/v1/health`` reads sessions,
not agents). Before the reads went off the loop, the health check waited for the lock too.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import psycopg
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

from .serve_proc import nexus, serving, write_config

pytestmark = pytest.mark.slow  # a real process and a real PostgreSQL


def _announcement(home: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    from nexus.config import load_config
    from nexus.server.discovery import server_file

    with monkeypatch.context() as patch:
        patch.setenv("NEXUS_HOME", str(home))
        patch.setenv("NEXUS_DATABASE_URL", url)
        return server_file(load_config())


def test_a_registry_read_waiting_on_a_lock_does_not_hold_the_server(
    postgres_url: str, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"NEXUS_DATABASE_URL": postgres_url}
    with FakeProviderServer(default=echo) as provider:
        write_config(isolated_env, provider)
        assert nexus(isolated_env, "agents", "add", "coder", env=env).returncode == 0
        announced = _announcement(isolated_env, postgres_url, monkeypatch)
        with serving(isolated_env, env=env, announced=announced) as (_, url):
            assert httpx.get(f"{url}/v1/health", timeout=30).status_code == 200
            sent: list[httpx.Response] = []
            with psycopg.connect(postgres_url) as locker:
                locker.execute("LOCK TABLE agents IN ACCESS EXCLUSIVE MODE")  # held until the block ends
                sender = threading.Thread(
                    target=lambda: sent.append(
                        httpx.post(f"{url}/v1/agents/coder/messages", json={"content": "hi"}, timeout=120)
                    )
                )
                sender.start()
                _until_waiting_on_the_lock(postgres_url)
                try:
                    health = httpx.get(f"{url}/v1/health", timeout=20)
                finally:
                    answered_while_locked = not sent
                    locker.rollback()  # the lock goes: the message's request goes on
            sender.join(60)
            assert health.status_code == 200 and answered_while_locked
            assert sent and sent[0].status_code == 202, sent


def _until_waiting_on_the_lock(url: str) -> None:
    """Until a backend of the server waits for a lock (the registry read of the message's request)."""
    import time

    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "the message's request never reached the registry"
            time.sleep(0.02)
