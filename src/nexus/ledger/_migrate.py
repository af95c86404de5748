"""Bringing a SQLite ledger to the schema this version knows, one migration of ``_schema.MIGRATIONS`` at a time."""

from __future__ import annotations

import sqlite3

from nexus.ledger._schema import MIGRATIONS, SCHEMA_VERSION
from nexus.ledger.errors import SchemaVersionError


def migrate(conn: sqlite3.Connection, *, target: int = SCHEMA_VERSION) -> int:
    """Bring the database to ``target`` (default: the latest) and return the version it had.

    Each migration runs in its own ``BEGIN IMMEDIATE`` transaction together with the
    ``user_version`` bump, so a crash leaves the file at a whole version. A file written by
    a newer schema is refused rather than guessed at.
    """
    found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"this database has schema version {found}, newer than the {SCHEMA_VERSION} this Nexus knows; "
            "upgrade nexus-broker (or open a copy of an older file)"
        )
    version = found
    while version < target:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current == version:  # another process may have migrated meanwhile
                for statement in _split(MIGRATIONS[version]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    return found


def _split(script: str) -> list[str]:
    """Split a migration script into statements (``executescript`` would commit our transaction)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
