"""How a CLI command opens the ledger its config names: an SQLite file, or a PostgreSQL database (a URL).

Every command runs its body as one coroutine (one ``asyncio.run``), and opens the ledger in it with
:func:`open_ledger`: ``database`` in nexus.toml or ``NEXUS_DATABASE_URL`` says where it is. The PostgreSQL
driver is imported only when the URL names a server. A server that cannot be reached, or a database of
a schema this version does not know, is one line and exit 2 (``nexus.cli._errors``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from nexus.config import NexusConfig
    from nexus.ledger import Ledger


def ledger_exists(config: NexusConfig) -> bool:
    """Whether there is a ledger to read: the SQLite file exists, or it is a database server's (always there).

    A file that could never be there is a ConfigError, not "no sessions yet": ``NEXUS_HOME`` naming a
    regular file made every read command say so with exit 0 while ``nexus run`` refused the same home.
    """
    target = config.database_target
    if isinstance(target, str) or target.exists():
        return True
    from nexus.cli._state import path_problem

    problem = path_problem(target, directory=False)
    if problem is not None:
        from nexus.errors import ConfigError

        raise ConfigError(f"the ledger: {problem}; point NEXUS_HOME (or database in nexus.toml) at a directory")
    return False


@asynccontextmanager
async def open_ledger(config: NexusConfig, *, reading: bool = False) -> AsyncIterator[Ledger]:
    """The ledger of ``config``, closed when the block ends; on SQLite a wait for another process is said.

    ``reading``: the command only reads, so on a full disk or in a read-only directory (where SQLite cannot
    even read a ledger the usual way) it reads the database file alone, read-only, and says what that may miss.
    """
    from nexus.ledger import Ledger, LedgerFullError, LedgerReadOnlyError

    target = config.database_target
    try:
        ledger = await Ledger.connect(target)
    except (LedgerFullError, LedgerReadOnlyError) as exc:
        if not reading or isinstance(target, str):
            raise
        ledger = Ledger.open_file_only(target)
        print(file_only_notice(target, full=isinstance(exc, LedgerFullError)), file=sys.stderr)
    try:
        if ledger.inline:
            ledger.database.on_busy = BusyNotice()
        yield ledger
    finally:
        await ledger.aclose()


def file_only_notice(database: Path, *, full: bool = True) -> str:
    """What a reader on a full disk (``full``) or in a read-only directory is told: read from the file alone,
    and how much of the log it cannot see."""
    missing = unseen_log(database)
    if full:
        return f"nexus: warning: the disk is full: reading {database.name} alone, read-only; {missing}. Free some space"
    return f"nexus: warning: {database.parent} is read-only: reading {database.name} alone; {missing}"


def unseen_log(database: Path) -> str:
    """What reading ``database`` alone misses: the writes still only in its write-ahead log, if any."""
    log = database.with_name(database.name + "-wal")
    try:
        unseen = log.stat().st_size
    except OSError:
        unseen = 0
    if unseen:
        return f"the last writes, still in {log.name} ({unseen:,} bytes), may be missing"
    return "nothing is missing (its write-ahead log is empty)"


async def recover_open_turns(ledger: Ledger) -> None:
    """Close the turns killed processes left open (``aborted``, with what they journaled), and say so."""
    recovered = await ledger.turns.recover()
    if recovered:
        from nexus.cli._errors import recovered_notice

        print(await recovered_notice(ledger, recovered), file=sys.stderr)


class BusyNotice:
    """``Database.on_busy`` for the CLI: say why nothing happens while another process holds agents.db.

    Said again only after a quiet spell of :attr:`REPEAT_S` (every write of a run finds the
    database locked while that process holds it).
    """

    REPEAT_S = 30.0

    def __init__(self) -> None:
        self.last = -self.REPEAT_S

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.REPEAT_S:
            from nexus.ledger import WAIT_ENV, wait_bound

            print(
                f"nexus: waiting for the database (held by another process); giving up after {wait_bound():g} s "
                f"({WAIT_ENV})",
                file=sys.stderr,
                flush=True,
            )
        self.last = now
