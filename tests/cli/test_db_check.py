"""``nexus db check``: the command a user runs after a crash or a full disk (a stranger's trial asked for it).

Real processes on real SQLite files: a whole ledger is ``ok`` with its counts, a file whose pages were
overwritten is reported (exit 1 or a one-line error, never a traceback), a missing file is exit 2 and is
not created, and nothing is changed by the check.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from nexus.ledger import Ledger, NewSession, TurnOpen
from nexus.testing.conformance.support import qa_turn, user

SRC = Path(__file__).resolve().parents[2] / "src"


def _nexus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "nexus.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def _ledger(path: Path, turns: int) -> None:
    async def fill() -> None:
        with Ledger.open(path) as ledger:
            await ledger.sessions.ensure(NewSession("main"))
            for n in range(turns):
                await qa_turn(ledger, "main", f"question {n} " + "x" * 400, f"answer {n} " + "y" * 400)
            await ledger.turns.open(TurnOpen("main", [user("left open by a killed run")]))

    asyncio.run(fill())


def test_a_whole_ledger_is_ok_with_its_counts_and_unchanged(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _ledger(home / "agents.db", 3)
    before = hashlib.sha256((home / "agents.db").read_bytes()).hexdigest()
    done = _nexus(home, "db", "check")
    assert done.returncode == 0, done.stderr
    assert f"{home / 'agents.db'}: ok (integrity_check and foreign_key_check)" in done.stdout
    assert "  sessions: 1" in done.stdout and "  turns: 4" in done.stdout and "  open turns: 1" in done.stdout
    assert hashlib.sha256((home / "agents.db").read_bytes()).hexdigest() == before


def test_a_damaged_file_is_reported_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _ledger(home / "agents.db", 200)
    db = home / "agents.db"
    data = bytearray(db.read_bytes())
    start = 4096 * 60  # a b-tree page of the turns' messages: its header overwritten
    data[start : start + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))
    done = _nexus(home, "db", "check")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{db}: DAMAGED" in done.stdout and "damaged: " in done.stdout, done.stdout
    assert "nexus db copy" in done.stderr


def test_a_missing_ledger_is_exit_2_and_not_created(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = _nexus(home, "db", "check")
    assert done.returncode == 2 and "no such ledger file" in done.stderr, done.stderr
    assert not (home / "agents.db").exists()


def test_a_postgresql_ledger_is_checked_by_the_server_and_counted(tmp_path: Path, postgres_url: str) -> None:
    async def fill() -> None:
        async with await Ledger.connect(postgres_url) as ledger:
            await ledger.sessions.ensure(NewSession("main"))
            await qa_turn(ledger, "main", "question", "answer")

    asyncio.run(fill())
    done = _nexus(tmp_path, "db", "check", "--database", postgres_url)
    assert done.returncode == 0, done.stderr
    assert ": ok (the server answers)" in done.stdout and "  turns: 1" in done.stdout, done.stdout


def test_the_verdict_never_prints_a_postgresql_password(tmp_path: Path, postgres_url: str) -> None:
    """The test server trusts local connections, so a password in the URL is accepted and ignored."""
    parts = urlsplit(postgres_url)
    user = parts.username or "postgres"
    with_password = urlunsplit(parts._replace(netloc=f"{user}:hunter2-secret@{parts.hostname}:{parts.port}"))
    done = _nexus(tmp_path, "db", "check", "--database", with_password)
    assert done.returncode == 0, done.stderr
    assert ": ok (the server answers)" in done.stdout, done.stdout
    assert "hunter2-secret" not in done.stdout + done.stderr


def test_an_empty_database_argument_is_exit_2_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    """``--database "$DB"`` with ``DB`` unset migrated (and created) the default ledger (a stranger's trial)."""
    home = tmp_path / "home"
    for args, name in (
        (("db", "migrate", "--database", ""), "--database"),
        (("db", "check", "--database", " "), "--database"),
        (("db", "copy", "", str(tmp_path / "out.db")), "SRC"),
    ):
        done = _nexus(home, *args)
        assert done.returncode == 2 and done.stderr.startswith(f"nexus: error: {name} is empty"), done.stderr
    _ledger(tmp_path / "source.db", 1)
    done = _nexus(home, "db", "copy", str(tmp_path / "source.db"), "")
    assert done.returncode == 2 and done.stderr.startswith("nexus: error: DST is empty"), done.stderr
    assert not home.exists() and not (tmp_path / "out.db").exists()


def test_a_directory_is_named_a_directory_with_its_agents_db(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _ledger(home / "agents.db", 1)
    done = _nexus(tmp_path, "db", "check", "--database", str(home))
    assert done.returncode == 2, done.stderr
    assert f"{home}: is a directory, not a ledger file; give its ledger file, {home / 'agents.db'}" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _nexus(tmp_path, "db", "check", "--database", str(empty))
    assert done.returncode == 2 and "is a directory, not a ledger file; it holds no agents.db" in done.stderr
    assert list(empty.iterdir()) == []
