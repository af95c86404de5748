"""Numbered SQL migrations of a PostgreSQL ledger, recorded with checksums in ``schema_migrations``.

``migrations/NNNN_name.sql`` are applied in order, all of those missing in ONE transaction, under
``pg_advisory_xact_lock`` (a transaction-level lock: two processes starting together wait for each other,
and nothing outlives the transaction, so a transaction-pooling pgbouncer is fine). A database that has a
migration this code does not ship, or one whose name or checksum differs, is refused
(:class:`SchemaVersionError`): it was written by another version of Nexus.
"""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger.errors import SchemaVersionError
from nexus.llm import now_ms

LOCK_KEY = 0x6E657875_736C6467 & 0x7FFFFFFFFFFFFFFF
"""The advisory lock migrations take ("nexusldg"), a BIGINT."""

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
  version BIGINT PRIMARY KEY,
  name TEXT NOT NULL,
  checksum TEXT NOT NULL,
  applied_at BIGINT NOT NULL
)"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One shipped migration: its number, name, SQL and the SHA-256 of the SQL."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the SQL text, hex."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def shipped() -> list[Migration]:
    """Every migration this code ships, in order."""
    found: list[Migration] = []
    for entry in resources.files("nexus.ledger.postgres").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


SCHEMA_VERSION = max(m.version for m in shipped())


def applied(conn: Any) -> list[tuple[int, str, str]]:
    """``(version, name, checksum)`` of every migration the database has (none: no ``schema_migrations``)."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
    if not exists:
        return []
    rows = conn.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version").fetchall()
    return [(int(v), str(n), str(c)) for v, n, c in rows]


def missing(conn: Any) -> list[Migration]:
    """The shipped migrations the database lacks; :class:`SchemaVersionError` if it has one that is not shipped."""
    ours = {m.version: m for m in shipped()}
    for version, name, checksum in applied(conn):
        mine = ours.pop(version, None)
        if mine is None:
            raise SchemaVersionError(
                f"this database has schema migration {version:04d}_{name}, which this Nexus does not know (it knows "
                f"up to {SCHEMA_VERSION:04d}); upgrade nexus-broker, or point it at another database"
            )
        if (mine.name, mine.checksum) != (name, checksum):
            raise SchemaVersionError(
                f"schema migration {version:04d} of this database ({name}, checksum {checksum[:12]}) is not the one "
                f"this Nexus ships ({mine.name}, {mine.checksum[:12]}); it was written by another build of Nexus"
            )
    return sorted(ours.values(), key=lambda m: m.version)


def migrate(conn: Any) -> list[Migration]:
    """Apply the missing migrations inside the caller's transaction (under the advisory lock); returns them.

    With no statement bound (``STATEMENT_TIMEOUT_S`` of the database, lifted for this transaction): a migration
    of a large ledger may build an index for minutes, and a process starting meanwhile waits for the lock as long."""
    conn.execute("SET LOCAL statement_timeout = 0")
    conn.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,))
    conn.execute(_TABLE)
    todo = missing(conn)
    for migration in todo:
        conn.execute(migration.sql)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
            (migration.version, migration.name, migration.checksum, now_ms()),
        )
    return todo
