"""``nexus db check``: is the ledger whole, and what does it hold — the question after a crash or a full disk.

On SQLite it runs ``PRAGMA integrity_check`` (every page, index and constraint SQLite can verify) and
``PRAGMA foreign_key_check``; on PostgreSQL, which checks its own pages, that the server answers. Both then
count what the ledger holds: sessions, turns, the turns still open (a run in progress, or one a killed process
left: the next run of that session closes it as ``aborted`` with what it journaled) and the queue's unfinished
items. Nothing is changed: a damaged file is reported, not repaired (exit 1); a missing one is exit 2.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from nexus.cli._ledger import unseen_log
from nexus.ledger import full_disk, read_only_place


def check_ledger(location: str) -> int:
    """Check the ledger at ``location`` (a file or a ``postgresql://`` URL); print the verdict and the counts."""
    from nexus.ledger import is_postgres_url

    if is_postgres_url(location):
        from nexus.ledger import redacted

        counts, problems, how = asyncio.run(_check_postgres(location)), [], "the server answers"
        location = redacted(location)  # the verdict names the server, never its password
    else:
        counts, problems, how = *_check_file(location), "integrity_check and foreign_key_check"
        full = full_disk(Path(location)) if problems and not counts else None
        if full is not None:  # it could not be read at all: a full disk, not a damaged file
            print(f"{location}: NOT CHECKED: {problems[0]}; {full}, and SQLite needs a little room beside a "
                  "ledger even to read it. Free some space and check again", file=sys.stderr)  # fmt: skip
            return 1
        read_only = read_only_place(Path(location)) if problems and not counts else None
        if read_only is not None:  # SQLite could not make its -shm file there: check the file alone
            counts, problems = _check_file(location, file_only=True)
            how += f", of the file alone: {read_only}; {unseen_log(Path(location))}"
    for problem in problems:
        print(f"damaged: {problem}")
    print(f"{location}: {'DAMAGED' if problems else 'ok'} ({how})")
    for name, count in counts:
        print(f"  {name}: {count:,}")
    if problems:
        print("copy what can still be read with `nexus db copy` to a new file, or restore a backup", file=sys.stderr)
    return 1 if problems else 0


def _check_file(path: str, *, file_only: bool = False) -> tuple[list[tuple[str, int]], list[str]]:
    """An SQLite ledger opened read-only (``mode=ro``: the check writes nothing, not even a schema stamp); with
    ``file_only`` the database file alone (``immutable=1``: no ``-shm`` made beside it, its log not read)."""
    import sqlite3

    from nexus.ledger import holdings, integrity_problems

    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?{'immutable=1' if file_only else 'mode=ro'}", uri=True)
    problems: list[str] = []
    counts: list[tuple[str, int]] = []
    try:
        problems = integrity_problems(conn)
        counts = holdings(conn)
    except sqlite3.DatabaseError as exc:
        problems.append(f"reading it failed: {exc}")
    finally:
        conn.close()
    return counts, problems


async def _check_postgres(url: str) -> list[tuple[str, int]]:
    from nexus.ledger import Ledger, holdings

    ledger = await Ledger.connect(url)
    try:
        await ledger.check(10.0)
        counts: list[tuple[str, int]] = await ledger.database.run_read(holdings)
        return counts
    finally:
        await ledger.aclose()
