"""The ledger's schema, brought up to date by hand (``nexus db migrate``): one line saying what was done."""

from __future__ import annotations

from pathlib import Path


def migrate_database(target: str | Path) -> str:
    """Bring the database at ``target`` (an SQLite file or a ``postgresql://`` URL) to the current schema.

    Returns the line ``nexus db migrate`` prints: the schema version, and what was applied.
    """
    from nexus.ledger.postgres import is_postgres_url, redacted

    if not is_postgres_url(target):
        from nexus.ledger._schema import SCHEMA_VERSION
        from nexus.ledger._sqlite import Database

        sqlite = Database(target)  # opening an SQLite file migrates it
        sqlite.close()
        found = sqlite.found_version
        done = "up to date" if found == SCHEMA_VERSION else f"migrated from version {found}"
        return f"{target}: SQLite schema version {SCHEMA_VERSION} ({done})"
    from nexus.ledger.postgres import _migrate as migrations
    from nexus.ledger.postgres._database import PgDatabase

    db = PgDatabase.connect(str(target))
    try:
        applied = db.write(migrations.migrate, serializable=False)
    finally:
        db.close()
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "nothing to apply"
    return f"{redacted(str(target))}: schema version {migrations.SCHEMA_VERSION} ({names})"
