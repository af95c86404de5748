"""Which SQL a store speaks is read from the connection: PostgreSQL's says so, SQLite's does not."""

from __future__ import annotations

import sqlite3

from nexus.ledger._rows import is_postgres
from nexus.ledger._write import for_update
from nexus.ledger.postgres._sql import PgConnection


class _Tagged(sqlite3.Connection):
    dialect = "postgresql"


def test_a_plain_sqlite_connection_is_sqlite_and_a_tagged_one_follows_its_tag() -> None:
    plain = sqlite3.connect(":memory:")
    tagged = sqlite3.connect(":memory:", factory=_Tagged)
    try:
        assert not is_postgres(plain)
        assert for_update(plain) == ""
        assert is_postgres(PgConnection(None))
        assert for_update(PgConnection(None)) == " FOR UPDATE"
        assert is_postgres(tagged)  # a subclass is asked, not assumed to be SQLite
    finally:
        plain.close()
        tagged.close()
