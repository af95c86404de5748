"""A ledger in a read-only directory (a read-only mount: a backup, a snapshot, another user's files).

SQLite makes ``agents.db-shm`` beside a WAL ledger even to read it, so in a directory it cannot write every
reading command failed ("cannot open the ledger … check the path and its permissions") and ``nexus db check``
called a whole file DAMAGED and advised restoring a backup. The reading commands now read the database file
alone and say so; ``db check`` checks the file alone and says it is ok; writing commands still refuse.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .test_read_full_disk import READS, home_with_two_turns
from .test_run_disk_full import _nexus


@pytest.fixture
def read_only_home(tmpfs: Callable[[str], Path], tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A home on its own tmpfs holding two turns and an agent, then remounted read-only (read-write again after)."""
    disk = tmpfs("8m")
    home, env = home_with_two_turns(disk, tmp_path)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        yield home, env
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=False)


def test_reading_commands_read_a_ledger_in_a_read_only_directory(read_only_home: tuple[Path, dict[str, str]]) -> None:
    home, env = read_only_home
    for args in READS:
        done = _nexus(env, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
        assert f"{home} is read-only: reading agents.db alone" in done.stderr, (args, done.stderr)
    listed = _nexus(env, "sessions", "list").stdout
    assert "main" in listed and "coding" in listed
    assert "one" in _nexus(env, "sessions", "history", "main").stdout


def test_db_check_calls_a_whole_ledger_in_a_read_only_directory_ok(read_only_home: tuple[Path, dict[str, str]]) -> None:
    home, env = read_only_home
    done = _nexus(env, "db", "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DAMAGED" not in done.stdout and "restore a backup" not in done.stderr
    assert f"{home / 'agents.db'}: ok" in done.stdout and "is read-only" in done.stdout
    assert "turns: 2" in done.stdout


def test_writing_in_a_read_only_directory_is_still_refused(read_only_home: tuple[Path, dict[str, str]]) -> None:
    _home, env = read_only_home
    done = _nexus(env, "run", "third")
    assert done.returncode == 1 and "cannot write the ledger" in done.stderr, done.stderr
    forked = _nexus(env, "sessions", "fork", "main", "--label", "copy")
    assert forked.returncode != 0 and "Traceback" not in forked.stderr, forked.stderr
