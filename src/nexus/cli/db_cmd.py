"""``nexus db migrate``, ``nexus db check`` and ``nexus db copy SRC DST``: the ledger's schema, its health, and
moving a ledger between databases.

A database is a file (SQLite) or a ``postgresql://`` URL. Bad input (a URL that does not parse, a server
that refuses, a schema this Nexus does not know, a target that is not empty) is one line and exit 2;
nothing is written then.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.ledger import Copied


def db_command(args: argparse.Namespace) -> int:
    """Run ``nexus db ACTION``."""
    from nexus.ledger import LedgerBusyError, LedgerError, LedgerUnavailableError

    try:
        if args.action == "migrate":
            return _migrate(args)
        if args.action == "check":
            from nexus.cli._db_check import check_ledger

            return check_ledger(_existing(str(_target(args))))
        return _copy(args)
    except LedgerError as exc:
        print(f"nexus: error: {_one_line(exc)}", file=sys.stderr)
        busy = isinstance(exc, LedgerBusyError) and not isinstance(exc, LedgerUnavailableError)
        return 1 if busy else 2  # busy (no connection slot, a lock held): the same command may work later


def _target(args: argparse.Namespace) -> str | Path:
    """The database a command works on: ``--database``, else the configured one (see docs/configuration.md).

    An empty ``--database ""`` is refused, not read as "not given": a script's unset variable would otherwise
    migrate or check a different ledger (the configured one, created if need be)."""
    if args.database is not None:
        return _location(_given("--database", str(args.database)))
    from nexus.config import load_config

    return load_config(args.config).database_target


def _migrate(args: argparse.Namespace) -> int:
    from nexus.ledger import migrate_database

    print(migrate_database(_target(args)))
    return 0


def _copy(args: argparse.Namespace) -> int:
    """Copy SRC into DST. From a damaged SQLite file what still reads is copied, what was not is one line on
    stderr, exit 1. A copy that fails leaves no DST file it made (PostgreSQL: its transaction rolled back)."""
    import sqlite3

    source, target = _existing(_given("SRC", args.source)), _location(_given("DST", args.target))
    made = _new_file(target)
    try:
        copied, shown = asyncio.run(_copy_between(source, target))
    except sqlite3.DatabaseError as exc:  # the source cannot be read even in part: nothing to copy
        _remove(made)
        print(f"nexus: error: {source} cannot be read ({_one_line(exc)}); nothing was copied: restore a backup",
              file=sys.stderr)  # fmt: skip
        return 2
    except BaseException:
        _remove(made)
        raise
    print(f"copied {copied.total} rows ({copied.rows['turns']} turns, {copied.rows['sessions']} sessions) "
          f"from {shown[0]} to {shown[1]}")  # fmt: skip
    if not copied.lost:
        return 0
    lost = ", ".join(loss.describe(table) for table, loss in copied.lost.items())
    repaired = "".join(f"; {what}: {count:,}" for what, count in copied.repaired.items())
    print(f"nexus: {shown[0]} is damaged: copied what still reads; not read: {lost}{repaired} "
          "(see docs/ledger.md, a copy of a damaged file)", file=sys.stderr)  # fmt: skip
    return 1


async def _copy_between(source: str, target: str) -> tuple[Copied, tuple[str, str]]:
    """The copy, and where from and to as messages name them (a URL without its password)."""
    from nexus.ledger import Ledger, copy_ledger, is_postgres_url

    src = await Ledger.connect(source)
    try:
        dst = await Ledger.connect(target)
        try:
            pg = is_postgres_url(target)
            copied = await asyncio.to_thread(copy_ledger, src.database, dst.database, postgres_target=pg)
        finally:
            await dst.aclose()
    finally:
        await src.aclose()
    return copied, (str(src.path), str(dst.path))


def _new_file(target: str) -> list[Path]:
    """What a copy to ``target`` is about to make: the file, then the folders above it that do not exist yet
    (nothing for a URL, ``:memory:`` or a file already there)."""
    from nexus.ledger import is_postgres_url

    if is_postgres_url(target) or target == ":memory:" or os.path.lexists(target):
        return []
    path = Path(target).absolute()
    return [path, *(folder for folder in path.parents if not folder.exists())]


def _remove(made: list[Path]) -> None:
    """Remove what a failed copy made (the file, SQLite's files beside it, new folders): no half-made ledger."""
    if not made:
        return
    file, folders = made[0], made[1:]
    for path in (file, *(file.with_name(file.name + end) for end in ("-wal", "-shm", "-journal"))):
        path.unlink(missing_ok=True)
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # something else is in it now: not ours to remove
            break


def _given(name: str, value: str) -> str:
    """``value`` unless it is empty (``--database "$DB"`` with ``DB`` unset): exit 2 naming the argument."""
    from nexus.errors import UsageError

    if not value.strip():
        raise UsageError(f"{name} is empty: give an agents.db file or a postgresql:// URL")
    return value


def _existing(source: str) -> str:
    """A source that is a file must exist: copying from a path that has no ledger would create an empty one."""
    from nexus.ledger import LedgerError, is_postgres_url

    if is_postgres_url(_location(source)) or source == ":memory:" or Path(source).is_file():
        return source
    if Path(source).is_dir():
        inside = Path(source) / "agents.db"
        hint = f"give its ledger file, {inside}" if inside.is_file() else "it holds no agents.db"
        raise LedgerError(f"{source}: is a directory, not a ledger file; {hint}")
    raise LedgerError(f"{source}: no such ledger file; give an existing agents.db or a postgresql:// URL")


def _location(value: str) -> str:
    """``value`` when it is a file path or a PostgreSQL URL; any other URL is refused (it would become a path)."""
    from nexus.ledger import LedgerError, location_problem

    problem = location_problem(value)
    if problem is not None:
        raise LedgerError(problem)
    return value


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (a libpq message can hold several)."""
    return " ".join(str(exc).split())
