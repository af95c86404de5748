"""A new ledger file is its owner's only: it holds every prompt and reply.

SQLite created ``agents.db`` (and its ``-wal`` and ``-shm``, which take the file's mode) ``0644`` in a ``0755``
home: every user of the machine could read every conversation, where capture and rescue files of the same
text were ``0600``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_ledger_and_its_log_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    old_mask = os.umask(0o022)
    try:
        database = tmp_path / "home" / "agents.db"
        with Ledger.open(database) as ledger:
            run_inline(ledger.sessions.create(NewSession("main")))
            assert _mode(database) == 0o600
            for beside in ("agents.db-wal", "agents.db-shm"):
                assert _mode(database.with_name(beside)) & 0o077 == 0, beside
    finally:
        os.umask(old_mask)


def test_an_existing_ledger_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    database = tmp_path / "agents.db"
    with Ledger.open(database) as ledger:
        run_inline(ledger.sessions.create(NewSession("main")))
    os.chmod(database, 0o640)  # shared with a group on purpose
    with Ledger.open(database) as ledger:
        assert [s.label for s in run_inline(ledger.sessions.list())] == ["main"]
    assert _mode(database) == 0o640
