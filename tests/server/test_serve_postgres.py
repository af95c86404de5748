"""The commands on a PostgreSQL ledger, as real processes: ``nexus run``, ``sessions``, ``send``, ``queue`` and
``nexus serve`` (with the loopback fake provider), and the one line and exit 2 of a ledger they cannot use.

Real PostgreSQL (the throwaway cluster of scripts/postgres.sh, a fresh database per test); the ledger is
named by ``NEXUS_DATABASE_URL``, so nothing of it may land in ``NEXUS_HOME`` but the per-URL lock directory.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

from .serve_proc import nexus, serving, write_config

pytestmark = pytest.mark.slow  # real processes and a real PostgreSQL


@pytest.fixture
def pg_home(postgres_url: str, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``NEXUS_HOME`` (empty) with the ledger at ``postgres_url`` (``NEXUS_DATABASE_URL``), here and in children."""
    monkeypatch.setenv("NEXUS_DATABASE_URL", postgres_url)
    return isolated_env


def _nexus(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return nexus(home, *args, timeout=120, env={"NEXUS_DATABASE_URL": url})


def _announcement() -> Path:
    """Where a server announces itself for this test's ``NEXUS_HOME`` and URL (where the CLI looks for it)."""
    from nexus.config import load_config
    from nexus.server.discovery import server_file

    return server_file(load_config())


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_nexus_run_on_postgresql_writes_a_turn_another_process_reads(postgres_url: str, pg_home: Path) -> None:
    isolated_env = pg_home
    with FakeProviderServer(default=echo) as provider:
        write_config(isolated_env, provider)
        ran = _nexus(isolated_env, postgres_url, "run", "hello over postgres")
        assert ran.returncode == 0 and ran.stdout.strip().endswith("hello over postgres"), ran.stderr
    listed = _nexus(isolated_env, postgres_url, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["label"] for s in json.loads(listed.stdout)] == ["main"]
    history = _nexus(isolated_env, postgres_url, "sessions", "history", "main")
    assert history.returncode == 0 and "user: hello over postgres" in history.stdout, history.stderr
    assert _rows(postgres_url, "SELECT status, session_label FROM turns") == [("completed", "main")]
    # the ledger is the server's: no SQLite file, nothing named after the URL in NEXUS_HOME
    assert sorted(p.name for p in isolated_env.iterdir()) == ["nexus.toml", "servers", "workspace"]


def test_serve_on_postgresql_answers_a_chat_and_a_broker_message_without_the_file_lock(
    postgres_url: str, pg_home: Path
) -> None:
    from nexus.broker.host import lock_path
    from nexus.config import load_config

    isolated_env = pg_home
    with FakeProviderServer(default=echo) as provider:
        write_config(isolated_env, provider)
        assert _nexus(isolated_env, postgres_url, "agents", "add", "coder").returncode == 0
        with serving(isolated_env, announced=_announcement()) as (process, url):
            chat = {"model": "coder", "messages": [{"role": "user", "content": "chat over postgres"}]}
            answer = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"].endswith("chat over postgres")
            sent = _nexus(isolated_env, postgres_url, "send", "coder", "broker over postgres", "--wait")
            assert sent.returncode == 0, sent.stderr
            assert "sent to the running nexus serve" in sent.stderr
            assert sent.stdout.strip().endswith("broker over postgres")
            queue = _nexus(isolated_env, postgres_url, "queue", "list", "--all", "--json")
            assert [item["status"] for item in json.loads(queue.stdout)] == ["delivered"] * 2, queue.stderr
            assert not _lock_held(lock_path(load_config()))  # no broker.lock: there is no file to guard
            second = _nexus(isolated_env, postgres_url, "serve", "--port", "0")  # one server per database for now
            assert second.returncode == 1 and "another process already drains" in second.stderr, second.stderr
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0 and "Traceback" not in stderr, stderr
    assert not _announcement().exists()
    sessions = _rows(postgres_url, "SELECT session_label, count(*) FROM turns GROUP BY 1 ORDER BY 1")
    assert sessions == [("agent:coder", 2)]  # the chat and the message, both through the broker to its session


def _lock_held(path: Path) -> bool:
    import fcntl

    if not path.exists():
        return False
    with open(path, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


COMMANDS = [("run", "hi"), ("serve", "--port", "0"), ("sessions", "list"), ("queue", "list"), ("send", "coder", "hi")]


def test_a_ledger_the_commands_cannot_use_is_one_line_and_exit_2(postgres_url: str, isolated_env: Path) -> None:
    unknown_schema = postgres_url
    with psycopg.connect(unknown_schema, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 'abc', 0)")
    cases = [
        ("postgresql://nexus@127.0.0.1:1/nexus", "cannot connect to the ledger database"),
        ("postgresql://nexus@[::1/nexus", "cannot connect to the ledger database"),
        (unknown_schema, "9999_from_the_future"),
    ]
    with FakeProviderServer(default=echo) as provider:
        write_config(isolated_env, provider)
        for url, said in cases:
            for command in COMMANDS:
                done = _nexus(isolated_env, url, *command)
                lines = done.stderr.strip().splitlines()
                assert done.returncode == 2 and len(lines) == 1 and said in lines[0], (command, url, done.stderr)
    assert _rows(unknown_schema, "SELECT count(*) FROM sessions") == [(0,)]  # nothing was written


def test_a_message_holding_a_nul_is_taken_and_run_on_postgresql(postgres_url: str, pg_home: Path) -> None:
    # it was refused with 422 "no PostgreSQL ledger could store it", while the chat-completions door and
    # inbound chat events took one: the ledger keeps a message as JSON, which escapes it
    with FakeProviderServer(default=echo) as provider:
        write_config(pg_home, provider)
        assert _nexus(pg_home, postgres_url, "agents", "add", "coder").returncode == 0
        with serving(pg_home, announced=_announcement()) as (process, url):
            body = {"content": "before\u0000after", "id": "nul-1"}
            sent = httpx.post(f"{url}/v1/agents/coder/messages", json=body, timeout=60)
            assert sent.status_code == 202, sent.text
            blank = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": " \u0000 "}, timeout=60)
            assert blank.status_code == 422 and "no content" in blank.text, blank.text
            for _ in range(600):
                if _rows(postgres_url, "SELECT status FROM queue_items WHERE message_id = 'nul-1'") == [("delivered",)]:
                    break
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0 and "Traceback" not in stderr, stderr
    history = _nexus(pg_home, postgres_url, "sessions", "history", "agent:coder")
    assert history.returncode == 0, history.stderr
    assert history.stdout.count("before\\x00after") == 2, history.stdout  # the message and its echo, escaped
