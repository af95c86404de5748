"""The PostgreSQL ledger's own promises: migrations (raced, refused when unknown), bad input, lossless copies.

Real PostgreSQL (a throwaway cluster from scripts/postgres.sh, a fresh database per test), real processes.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from nexus.ledger import AcceptRequest, CompactionRecord, Ledger, NewSession, TurnWrite
from nexus.ledger._copy import TABLES
from nexus.ledger.deliveries import DeliveryRecord
from nexus.ledger.errors import LedgerRefusedError, SchemaVersionError
from nexus.ledger.postgres._migrate import SCHEMA_VERSION, shipped
from nexus.llm.types import ToolCall, ToolResultMessage
from nexus.testing.conformance.support import reply, tool_round, user

SRC = Path(__file__).resolve().parents[2] / "src"


def nexus(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``nexus`` command in a child process."""
    full = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nexus.cli", *args], capture_output=True, text=True, env=full)


def empty_database(postgres_server: str, name: str) -> str:
    """A new database without any schema (``name``), dropped by nobody: the server goes with the session."""
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(postgres_server)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))


def test_processes_migrating_one_database_at_once_apply_each_migration_once(postgres_server: str) -> None:
    url = empty_database(postgres_server, "nexus_race")
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "db", "migrate", "--database", url],
            env={**os.environ, "PYTHONPATH": str(SRC)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0, 0, 0], outcomes
    applied = [out for out, _ in outcomes if "0001_ledger" in out]
    assert len(applied) == 1 and all("schema version" in out for out, _ in outcomes)
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version").fetchall()
    assert rows == [(m.version, m.name, m.checksum) for m in shipped()]


async def test_a_schema_this_nexus_does_not_know_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 'abc', 0)")
    with pytest.raises(SchemaVersionError, match="9999_from_the_future"):
        await Ledger.connect(postgres_url)
    result = nexus("db", "migrate", "--database", postgres_url)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "9999_from_the_future" in result.stderr and "upgrade nexus-broker" in result.stderr
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = 9999")
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    with pytest.raises(SchemaVersionError, match="another build of Nexus"):
        await Ledger.connect(postgres_url)


async def test_a_statement_the_server_refuses_is_a_ledger_refused_error(postgres_url: str) -> None:
    # it was a bare LedgerError, which the HTTP server answered 400: a client's fault for the server's trouble
    ledger = await Ledger.connect(postgres_url)
    try:
        with pytest.raises(LedgerRefusedError, match="refused a statement") as refused:
            ledger.database.write(lambda conn: conn.execute("SELECT * FROM no_such_table"))
        assert "no_such_table" in str(refused.value)
        with pytest.raises(LedgerRefusedError, match="NUL"):  # a value its text type cannot hold
            ledger.database.write(lambda conn: conn.execute("SELECT CAST(? AS text)", ("a\x00b",)))
        await ledger.sessions.ensure(NewSession("after"))  # the connection still serves
        assert "after" in [session.label for session in await ledger.sessions.list()]
    finally:
        ledger.close()


async def test_a_database_behind_is_refused_without_migrate_and_brought_up_with_it(postgres_server: str) -> None:
    url = empty_database(postgres_server, "nexus_behind")
    with pytest.raises(SchemaVersionError, match="nexus db migrate"):
        await Ledger.connect(url, migrate=False)
    async with await Ledger.connect(url) as ledger:
        await ledger.sessions.create(NewSession("s"))
    assert max(m.version for m in shipped()) == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "postgresql://nexus@127.0.0.1:1/nexus",
            "cannot connect to the ledger database postgresql://nexus@127.0.0.1:1",
        ),
        ("postgresql://nexus:secret@127.0.0.1:1/nexus", "cannot connect"),
    ],
)
def test_an_unreachable_server_is_one_line_and_exit_2(url: str, said: str) -> None:
    result = nexus("db", "migrate", "--database", url)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "secret" not in result.stderr and "Traceback" not in result.stderr


def test_an_unknown_database_and_a_bad_url_are_one_line_and_exit_2(postgres_server: str) -> None:
    parts = urlsplit(postgres_server)
    missing = urlunsplit((parts.scheme, parts.netloc, "/no_such_database", "", ""))
    for url in (missing, "postgresql://nexus@[::1/nexus", "postgresql://nexus@127.0.0.1:notaport/nexus"):
        result = nexus("db", "migrate", "--database", url)
        assert result.returncode == 2, (url, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr


def test_the_database_url_comes_from_the_environment_or_the_config(postgres_url: str, isolated_env: Path) -> None:
    result = nexus("db", "migrate", env={"NEXUS_DATABASE_URL": postgres_url})
    assert result.returncode == 0 and "schema version" in result.stdout, result.stderr
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('database = "${LEDGER_URL}"\n')
    result = nexus("db", "migrate", env={"LEDGER_URL": postgres_url})
    assert result.returncode == 0 and "nothing to apply" in result.stdout, result.stderr
    result = nexus("db", "migrate")  # LEDGER_URL unset: a config error naming it, no guess
    assert result.returncode == 2 and "LEDGER_URL" in result.stderr


# --------------------------------------------------------------------------- copies


async def _fill(ledger: Ledger) -> None:
    """A ledger with something in every table: forks, a compaction, an open turn, queue items under a lease, agents."""
    await ledger.agents.save("w", role="worker", session_label="agent:w", spec={"model": "m"})
    await ledger.sessions.create(NewSession("main", persona_id="atlas", metadata={"k": [1, "ü"]}))
    await ledger.sessions.add_alias("phone:+1", "main")
    first = await ledger.turns.write(
        TurnWrite("main", query_messages=[user("q1")], response_messages=[*tool_round("c1"), reply("a1")])
    )
    second = await ledger.turns.write(TurnWrite("main", query_messages=[user("q2")], response_messages=[reply("a2")]))
    await ledger.sessions.create(NewSession("alt", origin="fork", head_turn_id=first))
    await ledger.turns.write(TurnWrite("alt", query_messages=[user("q3")], response_messages=[reply("a3")]))
    record = CompactionRecord("summary", second, first, 1, model="cheap", tokens_before=100, tokens_after=10)
    await ledger.turns.write(TurnWrite("main", compaction=record))
    item, _ = await ledger.queue.accept(AcceptRequest("w", "agent:w", "m1", "cli", {"content": "hi"}, "followup"))
    await ledger.queue.accept(AcceptRequest("w", "agent:w", "m2", "boss", {"content": "?"}, "collect", True))
    lease = await ledger.leases.acquire("agent:w", "host:1 2", 60_000)
    await ledger.queue.claim([item.id], lease=lease)
    from nexus.ledger import JournalToolCall, TurnOpen

    opened = await ledger.turns.open(TurnOpen("agent:w", [user("hi")], system_prompt="You are w."))
    call = ToolCall("c9", "read", {"path": "x"})
    await ledger.turns.journal([JournalToolCall(opened, call, ToolResultMessage("c9", "read", []), 1, 2)])
    target = {"chat_id": 7}
    await ledger.deliveries.record(DeliveryRecord(second, "main", "tg", "a", target, "blocks", "delivered", 1, 2))
    await asyncio.to_thread(_route_and_judge, ledger)


def _route_and_judge(ledger: Ledger) -> None:
    """A routing decision with feedback: the A/B record nothing can rebuild (the index can be)."""
    from nexus.routing import Router

    router = Router(ledger, embedder=None)
    try:
        decision = router.route("answer q2 again")
        assert decision.decision_id is not None
        router.store.feedback(decision.decision_id, 1, "right work")
    finally:
        router.close()


def _sqlite_tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT {c} FROM {t} ORDER BY {c.split(',')[0]}").fetchall() for t, c in TABLES}


def _postgres_tables(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT {c} FROM {t} ORDER BY {c.split(',')[0]}").fetchall() for t, c in TABLES}


async def test_a_copy_to_postgresql_and_back_keeps_every_row_of_every_table(postgres_url: str, tmp_path: Path) -> None:
    original, back = tmp_path / "agents.db", tmp_path / "back.db"
    async with await Ledger.connect(original) as ledger:
        await _fill(ledger)
    there = nexus("db", "copy", str(original), postgres_url)
    assert there.returncode == 0, there.stderr
    again = nexus("db", "copy", postgres_url, str(back))
    assert again.returncode == 0, again.stderr
    rows = _sqlite_tables(original)
    assert all(rows[table] for table, _ in TABLES if table != "broker_messages" or rows[table])
    assert _postgres_tables(postgres_url) == rows
    assert _sqlite_tables(back) == rows
    decisions = "SELECT id, task, feedback, feedback_note FROM route_decisions"
    with sqlite3.connect(original) as kept, sqlite3.connect(back) as returned:
        assert kept.execute(decisions).fetchall() == returned.execute(decisions).fetchall() != []
    assert nexus("route", "answer q2", "--json", env={"NEXUS_DATABASE_URL": postgres_url}).returncode == 0
    async with await Ledger.connect(postgres_url) as copied, await Ledger.connect(original) as source:
        for label in ("main", "alt", "agent:w"):
            assert await copied.turns.history(label) == await source.turns.history(label)
        assert await copied.turns.recover(force=True) == await source.turns.recover(force=True)
        await copied.turns.write(TurnWrite("main", query_messages=[user("more")]))  # identities go on
        await copied.sessions.create(NewSession("new"))


async def test_a_copy_into_a_database_that_holds_a_ledger_is_refused(postgres_url: str, tmp_path: Path) -> None:
    source = tmp_path / "agents.db"
    async with await Ledger.connect(source) as ledger:
        await ledger.sessions.create(NewSession("s"))
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.create(NewSession("already-here"))
    result = nexus("db", "copy", str(source), postgres_url)
    assert result.returncode == 2 and "already holds a ledger" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    missing = nexus("db", "copy", str(tmp_path / "nope.db"), str(tmp_path / "out.db"))
    assert missing.returncode == 2 and "no such ledger file" in missing.stderr
    assert not (tmp_path / "out.db").exists()


def test_a_server_ledger_out_of_reach_is_one_line_and_a_command_that_needs_a_file_refuses_it(
    isolated_env: Path,
) -> None:
    url = "postgresql://nexus:secret@127.0.0.1:1/nexus"
    for args in (("sessions", "list"), ("queue", "list"), ("serve", "--port", "0"), ("send", "a", "hi")):
        result = nexus(*args, env={"NEXUS_DATABASE_URL": url})
        assert result.returncode == 2, (args, result.stderr)
        assert "cannot connect to the ledger database postgresql://nexus@127.0.0.1:1/nexus" in result.stderr
        assert "secret" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    doctor = nexus("doctor", env={"NEXUS_DATABASE_URL": url})  # the database line says why, the others go on
    (line,) = [line for line in doctor.stdout.splitlines() if "database" in line]
    assert doctor.returncode == 1 and line.startswith("[fail] database")
    assert "cannot connect to the ledger database postgresql://nexus@127.0.0.1:1/nexus" in line
    assert "secret" not in doctor.stdout + doctor.stderr
    assert not any(isolated_env.rglob("*postgres*")) and not any(isolated_env.rglob("*.db"))
    assert not (isolated_env / "workspace").exists(), "nothing written: not even the workspace"


def test_a_file_of_a_newer_schema_is_one_line_and_exit_2(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(isolated_env / "agents.db") as conn:
        conn.execute("PRAGMA user_version = 999")
    for args in (("sessions", "list"), ("db", "migrate"), ("serve", "--port", "0")):
        result = nexus(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "schema version 999" in result.stderr and len(result.stderr.strip().splitlines()) == 1


async def test_connections_the_server_kills_are_replaced_and_nothing_is_lost(postgres_url: str) -> None:
    database = urlsplit(postgres_url).path.lstrip("/")
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.create(NewSession("s"))
        for n in range(3):
            with psycopg.connect(postgres_url, autocommit=True) as admin:  # pg_terminate_backend on every other one
                killed = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    (database,),
                ).fetchone()
            assert killed is not None and killed[0] >= 1
            await ledger.turns.write(TurnWrite("s", query_messages=[user(f"q{n}")], response_messages=[reply("a")]))
        assert len(await ledger.turns.path("s")) == 3


async def test_pi_files_go_in_and_out_of_a_postgresql_ledger(postgres_url: str, tmp_path: Path) -> None:
    async with await Ledger.connect(tmp_path / "agents.db") as source:
        await _fill(source)
        text = await source.pi.export_pi("main")
        expected = await source.turns.history("main")
    path = tmp_path / "main.jsonl"
    path.write_text(text)
    async with await Ledger.connect(postgres_url) as ledger:
        result = await ledger.pi.import_pi(path, "imported")
        assert result.session_label == "imported" and result.turns >= 3
        assert await ledger.turns.history("imported") == expected
        again = await ledger.pi.export_pi("imported")
    assert [line for line in again.splitlines() if '"message"' in line] == [
        line for line in text.splitlines() if '"message"' in line
    ]


def test_doctor_on_a_postgresql_ledger_says_what_it_holds_and_what_to_run(
    postgres_url: str, isolated_env: Path
) -> None:
    def database_line() -> str:
        done = nexus("doctor", env={"NEXUS_DATABASE_URL": postgres_url})
        (line,) = [line for line in done.stdout.splitlines() if " database " in line]
        return line

    shown = postgres_url.split("@")[-1]
    line = database_line()
    assert line.startswith("[ok  ] database") and shown in line, line
    assert "schema current; 0 sessions; LISTEN/NOTIFY wake-ups" in line and "PostgreSQL 15" in line, line
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        newest = conn.execute("SELECT max(version), min(version) FROM schema_migrations").fetchone()
        assert newest is not None
        conn.execute("DELETE FROM schema_migrations WHERE version = %s", (newest[0],))
    behind = database_line()
    assert behind.startswith("[fail] database") and "run `nexus db migrate`" in behind, behind
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 'abc', 0)")
    unknown = database_line()
    assert unknown.startswith("[fail] database") and "9999_from_the_future" in unknown, unknown
    assert not any(isolated_env.rglob("*.db"))  # no SQLite file named after the URL
