"""``nexus serve`` stopped (SIGTERM, Ctrl-C) while its PostgreSQL server has gone silent exits, and loses nothing.

A silent server (the postmaster or a backend ``SIGSTOP``-ed, a proxy between them that stops forwarding)
neither answers nor closes: a statement already on the wire waits for good. Before, such a stop waited for
that statement forever (the aborted run's write on a worker thread, and then the close of the workers): the
process never exited. Now the stop's bound (``STOP_WAIT_S`` after the signal) ends the connections still
waiting, says what was abandoned, and exits 1. What it could not write stays as it was: the next start,
on a healthy server, runs the message whose run was cut, and the one queued behind it, once each.

Real processes, a real signal and real PostgreSQL, behind a proxy this test silences (:mod:`.pg_silent`).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from nexus.ledger import Ledger
from nexus.ledger.errors import LedgerUnavailableError
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall, text

from .pg_silent import SilentProxy
from .serve_proc import nexus, serving, write_config

pytestmark = pytest.mark.slow  # real processes and a real PostgreSQL

EXIT_WAIT_S = 60
"""How long the test waits for the stopped server: the stop's bound (10 s) and uvicorn's (5 s), with room for
a loaded machine; before, it never exited."""

RUN_WAIT_S = 120


def _announcement(monkeypatch: pytest.MonkeyPatch, url: str) -> Path:
    """Where a server of ``url`` announces itself for this test's ``NEXUS_HOME``."""
    from nexus.config import load_config
    from nexus.server.discovery import server_file

    monkeypatch.setenv("NEXUS_DATABASE_URL", url)
    return server_file(load_config())


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def _wait_for(what: str, check: object, timeout: float = RUN_WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _send(url: str, content: str, mode: str) -> None:
    sent = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": content, "mode": mode}, timeout=30)
    assert sent.status_code == 202, sent.text


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_serve_stopped_while_postgresql_is_silent_exits_and_the_next_start_runs_each_message_once(
    stop: signal.Signals, postgres_url: str, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolated_env
    release = threading.Event()
    with FakeProviderServer(
        stall(after_chunks=1, seconds=300, then=text("late"), release=release), default=echo
    ) as provider:
        write_config(home, provider, broker="lease_ttl_ms = 3000")
        with SilentProxy(postgres_url) as proxy:
            env = {"NEXUS_DATABASE_URL": proxy.url}
            assert nexus(home, "agents", "add", "coder", env=env, timeout=120).returncode == 0
            with serving(home, env=env, announced=_announcement(monkeypatch, proxy.url)) as (process, url):
                _send(url, "first message", "followup")
                _wait_for("the first run to reach the provider", lambda: provider.requests)
                _send(url, "second message", "followup")  # waits behind the first
                proxy.silence()  # the run is streaming: its writes from now on go unanswered
                process.send_signal(stop)
                try:
                    _, stderr = process.communicate(timeout=EXIT_WAIT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    _, stderr = process.communicate()
                    raise AssertionError(f"not exited {EXIT_WAIT_S} s after {stop.name}: {stderr[-3000:]}") from None
            assert "Traceback" not in stderr, stderr
            assert process.returncode == 1, stderr
            assert "database did not answer" in stderr and "abandoned" in stderr, stderr
        release.set()
        # the proxy is gone (its connections cut): the next start talks to the healthy server directly
        with serving(
            home, env={"NEXUS_DATABASE_URL": postgres_url}, announced=_announcement(monkeypatch, postgres_url)
        ) as (
            again,
            _,
        ):
            _wait_for("both messages to be delivered", lambda: _statuses(postgres_url) == ["delivered"] * 2)
            again.send_signal(signal.SIGTERM)
            _, stderr = again.communicate(timeout=EXIT_WAIT_S)
        assert again.returncode == 0 and "Traceback" not in stderr, stderr
    consumed = _rows(
        postgres_url,
        "SELECT q.message_json, t.status FROM queue_items q JOIN turns t ON t.id = q.turn_id ORDER BY q.rowid",
    )
    assert [(json.loads(str(m))["content"], s) for m, s in consumed] == [
        ("first message", "completed"),
        ("second message", "completed"),
    ], consumed
    assert _rows(postgres_url, "SELECT count(*) FROM turns WHERE status = 'completed'") == [(2,)]


def _statuses(url: str) -> list[object]:
    return [status for (status,) in _rows(url, "SELECT status FROM queue_items ORDER BY rowid")]


async def test_a_stopping_ledger_cuts_the_transaction_a_silent_server_never_answers(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXUS_DB_WAIT_S", "3")  # the start tree's teardown: retries after the proxy is gone
    proxy = SilentProxy(postgres_url)
    ledger = await Ledger.connect(proxy.url)
    try:
        database: Any = ledger.database
        assert await database.run_read(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1  # a pooled connection
        proxy.silence()
        read = asyncio.ensure_future(database.run_read(lambda c: c.execute("SELECT 2").fetchone()[0]))
        await asyncio.sleep(0.5)
        assert not read.done()  # on the wire, unanswered
        ledger.stopping(1.0)
        with pytest.raises(LedgerUnavailableError) as raised:
            await asyncio.wait_for(read, EXIT_WAIT_S)
        assert "did not answer before the process's stop gave up on it" in str(raised.value), raised.value
        assert len(ledger.abandoned) == 1 and "on the wire for" in ledger.abandoned[0], ledger.abandoned
    finally:
        proxy.close()
        await asyncio.wait_for(ledger.aclose(), EXIT_WAIT_S)
