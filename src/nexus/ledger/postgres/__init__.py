"""The Agents Ledger on PostgreSQL (psycopg 3 + psycopg_pool): the same stores as SQLite, on a server.

``await Ledger.connect("postgresql://user:pass@host/db")`` opens it (``NEXUS_DATABASE_URL`` or ``database``
in ``nexus.toml`` for the CLI). Importing this package loads neither psycopg nor a connection; see
docs/ledger.md ("PostgreSQL").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.ledger.errors import SchemaVersionError
from nexus.ledger.postgres._url import is_postgres_url, location_problem, redacted

if TYPE_CHECKING:
    from nexus.ledger.postgres._database import PgDatabase


def open_database(url: str, *, migrate: bool = True) -> PgDatabase:
    """Connect to ``url`` and bring its schema up to date (blocking: call it off the event loop).

    With ``migrate=False`` a database whose schema is behind is refused too (``nexus db migrate`` brings
    it up). A schema this code does not know is always refused (:class:`SchemaVersionError`).
    """
    from nexus.ledger.postgres import _migrate
    from nexus.ledger.postgres._database import PgDatabase

    db = PgDatabase.connect(url)
    try:
        if migrate:
            db.write(_migrate.migrate, serializable=False)
        else:
            todo = db.read(_migrate.missing)
            if todo:
                names = ", ".join(f"{m.version:04d}_{m.name}" for m in todo)
                raise SchemaVersionError(
                    f"the ledger database {db.location} lacks schema migrations {names}; run `nexus db migrate`"
                )
    except BaseException:
        db.close()
        raise
    return db


__all__ = ["is_postgres_url", "location_problem", "open_database", "redacted"]
