"""Every transaction bounds its statements (``statement_timeout``, set like the idle bound with ``SET LOCAL`` in
its ``BEGIN``): a statement the server runs past it is cancelled (SQLSTATE 57014), and the transaction is run
again like one whose connection was lost, until the caller's wait is over. Before, nothing bounded a statement
on a slow server: a worker waited as long as the server took. The bound ends with the transaction (a
transaction-pooling pgbouncer never hands it to another client), and the two jobs that may legitimately run
long, a migration and a copy of a whole ledger, lift it. Real PostgreSQL (a fresh database).
"""

from __future__ import annotations

from typing import Any

import pytest

from nexus.ledger.errors import LedgerUnavailableError
from nexus.ledger.postgres import _database, _migrate
from nexus.ledger.postgres._database import STATEMENT_TIMEOUT_S, PgDatabase


@pytest.fixture
def database(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("NEXUS_PG_POOL", "1")  # one connection: what a transaction leaves on it, the next sees
    db = PgDatabase.connect(postgres_url)
    yield db
    db.close()


def _shown(conn: Any) -> str:
    """The bound in force, in milliseconds (``"0"``: none)."""
    return str(conn.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'").fetchone()[0])


def test_each_transaction_bounds_its_statements_and_the_bound_ends_with_it(database: PgDatabase) -> None:
    assert _shown_in(database) == str(int(STATEMENT_TIMEOUT_S * 1000))
    with database._pool.connection() as raw:  # the pooled connection, between transactions
        assert _shown(raw) == "0"  # the server's default, untouched


def _shown_in(database: PgDatabase) -> str:
    return database.read(_shown)


def test_a_statement_past_the_bound_is_cancelled_and_the_transaction_run_again_until_the_wait_is_over(
    database: PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounds = _database._BOUNDS.replace(f"'{int(STATEMENT_TIMEOUT_S * 1000)}'", "'200'")  # 200 ms
    assert bounds != _database._BOUNDS
    monkeypatch.setattr(_database, "_BOUNDS", bounds)
    attempts = []

    def slow(conn: Any) -> Any:
        attempts.append(1)
        return conn.execute("SELECT pg_sleep(3)").fetchone()

    with pytest.raises(LedgerUnavailableError) as raised:
        database.write(slow, wait_s=1)
    assert len(attempts) >= 2, attempts  # run again, as after a lost connection
    said = str(raised.value)
    assert "past their 60 s bound" in said and "statement timeout" in said, said
    assert database.read(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1  # the connection is fine


def test_a_migration_and_a_copy_lift_the_bound_in_their_own_transactions(database: PgDatabase) -> None:
    from nexus.ledger import _copy

    def migrated(conn: Any) -> str:
        _migrate.migrate(conn)
        return _shown(conn)

    assert database.write(migrated, serializable=False) == "0"

    def copying(conn: Any) -> str:
        _copy._unbounded(conn)
        return _shown(conn)

    assert database.read(copying) == "0"
    assert _shown_in(database) == str(int(STATEMENT_TIMEOUT_S * 1000))  # the next transaction has it again
