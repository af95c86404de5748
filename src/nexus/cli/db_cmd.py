"""``nexus db migrate``, ``nexus db check`` and ``nexus db copy SRC DST``: the ledger's schema, its health, and
moving a ledger between databases.

A database is a file (SQLite) or a ``postgresql://`` URL. Bad input (a URL that does not parse, a server
that refuses, a schema this Nexus does not know, a target that is not empty) is one line and exit 2;
nothing is written then.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


def db_command(args: argparse.Namespace) -> int:
    """Run ``nexus db ACTION``."""
    from nexus.ledger import LedgerError

    try:
        if args.action == "migrate":
            return _migrate(args)
        if args.action == "check":
            from nexus.cli._db_check import check_ledger

            return check_ledger(_existing(str(_target(args))))
        return _copy(args)
    except LedgerError as exc:
        print(f"nexus: error: {_one_line(exc)}", file=sys.stderr)
        return 2


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
    from nexus.ledger import copy_ledger, is_postgres_url

    async def run() -> int:
        from nexus.ledger import Ledger

        source = await Ledger.connect(_existing(_given("SRC", args.source)))
        try:
            target = await Ledger.connect(_location(_given("DST", args.target)))
            try:
                pg = is_postgres_url(args.target)
                copied = await asyncio.to_thread(copy_ledger, source.database, target.database, postgres_target=pg)
            finally:
                await target.aclose()
        finally:
            await source.aclose()
        print(f"copied {copied.total} rows ({copied.rows['turns']} turns, {copied.rows['sessions']} sessions) "
              f"from {source.path} to {target.path}")  # fmt: skip
        return 0

    return asyncio.run(run())


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
