"""What ``nexus db check`` reads of a ledger: SQLite's own verdict on the file, and what the ledger holds.

Kept in the ledger package (not the CLI) so the open-turn and unfinished-item conditions are the ones the
stores and their partial indexes use (:data:`OPEN_TURNS`, :data:`PENDING`). Both functions take a DB-API
connection (a read-only sqlite3 one, or PostgreSQL's through ``run_read``).
"""

from __future__ import annotations

from typing import Any

from nexus.ledger._schema import OPEN_TURNS, PENDING

HOLDINGS = (
    ("sessions", "SELECT count(*) FROM sessions"),
    ("turns", "SELECT count(*) FROM turns"),
    ("open turns", f"SELECT count(*) FROM turns WHERE {OPEN_TURNS}"),
    ("queued messages not yet delivered", f"SELECT count(*) FROM queue_items WHERE {PENDING}"),
)


def integrity_problems(conn: Any) -> list[str]:
    """What SQLite's ``integrity_check`` and ``foreign_key_check`` find wrong (empty: nothing)."""
    found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall() if row[0] != "ok"]
    for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check").fetchall():
        found.append(f"{table} row {rowid} points to a missing {parent} row")
    return found


def holdings(conn: Any) -> list[tuple[str, int]]:
    """How many sessions, turns, open turns and undelivered queue items the ledger holds."""
    return [(name, int(conn.execute(sql).fetchone()[0])) for name, sql in HOLDINGS]
