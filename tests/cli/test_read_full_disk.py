"""Reading the ledger when the disk under it is already full (a real tmpfs filled to the last byte).

SQLite needs a little room beside the file (``agents.db-shm``) even to read a ledger in WAL mode, and the
last process to close a ledger removes that file: so with the disk full, ``nexus sessions list``,
``history``, ``show``, ``export``, ``agents list`` and ``queue list`` all failed ("cannot open the ledger …
free some space"), showing nothing of what the user had. The reading commands now read the database file
alone, read-only, and say so; writing commands still refuse, and nothing stored changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.ledger import Ledger, LedgerFullError, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

from .fake_config import write_fake_config
from .test_run_disk_full import _env, _nexus, fill

READS = (
    ("sessions", "list"),
    ("sessions", "history", "main"),
    ("sessions", "show", "main"),
    ("sessions", "export", "main"),
    ("agents", "list"),
    ("agents", "show", "coder"),
    ("queue", "list"),
)


def home_with_two_turns(disk: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A home on ``disk`` holding two turns of ``main`` and an agent ``coder`` (session ``coding``), and the
    environment of the commands that read it."""
    home, tmp = disk / "home", tmp_path / "tmp"
    tmp.mkdir()
    env = _env(home, tmp)
    with FakeProviderServer(text("one"), text("two")) as server:
        write_fake_config(home, server)
        assert _nexus(env, "run", "first").returncode == 0
        assert _nexus(env, "run", "second").returncode == 0
        assert _nexus(env, "agents", "add", "coder", "--session", "coding").returncode == 0
    return home, env


def test_reading_commands_read_a_ledger_on_a_full_disk(tmpfs: Callable[[str], Path], tmp_path: Path) -> None:
    disk = tmpfs("4m")
    home, env = home_with_two_turns(disk, tmp_path)
    before = {args: _nexus(env, *args) for args in READS}
    assert all(done.returncode == 0 for done in before.values()), before
    assert not (home / "agents.db-shm").exists(), "the last process to close the ledger removes its index"

    fill(disk / "fill")
    try:
        during = {args: _nexus(env, *args) for args in READS}
        forked = _nexus(env, "sessions", "fork", "main", "--label", "copy")
    finally:
        (disk / "fill").unlink()

    for args, done in during.items():
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
        assert _same(done.stdout) == _same(before[args].stdout), args
        assert "the disk is full: reading agents.db alone, read-only" in done.stderr, (args, done.stderr)
        assert "nothing is missing" in done.stderr, done.stderr
    assert forked.returncode == 1 and "Traceback" not in forked.stderr, forked.stderr
    assert "free some space" in forked.stderr, forked.stderr
    with Ledger.open(home / "agents.db") as ledger:
        assert [t.status for t in run_inline(ledger.turns.path("main"))] == ["completed", "completed"]
        assert [s.label for s in run_inline(ledger.sessions.list())] == ["coding", "main"]  # no "copy"


def _same(out: str) -> object:
    """The output; of an export, its entries' messages (each export makes up new entry ids)."""
    if not out.startswith('{"type":"session"'):
        return out
    return [json.loads(line).get("message") for line in out.splitlines()]


def test_a_ledger_read_from_its_file_alone_refuses_every_write(tmp_path: Path) -> None:
    database = tmp_path / "agents.db"
    with Ledger.open(database) as ledger:
        run_inline(ledger.sessions.create(NewSession("kept")))
    ledger = Ledger.open_file_only(database)
    try:
        assert [s.label for s in run_inline(ledger.sessions.list())] == ["kept"]
        with pytest.raises(LedgerFullError, match="read-only, from the database file alone"):
            run_inline(ledger.sessions.create(NewSession("refused")))
    finally:
        ledger.close()
    assert not (tmp_path / "agents.db-shm").exists() and not (tmp_path / "agents.db-wal").exists()


def test_a_file_of_another_schema_is_refused_when_read_alone(tmp_path: Path) -> None:
    import sqlite3

    from nexus.ledger import LedgerError

    database = tmp_path / "agents.db"
    with Ledger.open(database):
        pass
    conn = sqlite3.connect(database)
    conn.execute("PRAGMA user_version = 3")
    conn.close()  # the last connection checkpoints its log into the file: the file alone says 3
    with pytest.raises(LedgerError, match=r"schema version is 3.*must be migrated first"):
        Ledger.open_file_only(database)


def test_the_notice_says_how_much_of_the_log_it_cannot_see(tmp_path: Path) -> None:
    from nexus.cli._ledger import file_only_notice

    database = tmp_path / "agents.db"
    assert "nothing is missing" in file_only_notice(database)
    (tmp_path / "agents.db-wal").write_bytes(b"\0" * 4120)
    assert "the last writes, still in agents.db-wal (4,120 bytes), may be missing" in file_only_notice(database)
