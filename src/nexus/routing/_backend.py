"""Which route store a ledger gets: the one in its own database, SQLite or PostgreSQL."""

from __future__ import annotations

from nexus.ledger import Ledger, is_postgres_url
from nexus.routing.store import RouteStore


def open_route_store(ledger: Ledger) -> RouteStore:
    """The route store of the ledger's backend: in the SQLite file, or in the PostgreSQL database."""
    if is_postgres_url(ledger.path):  # a server's URL, else a file or :memory:
        from nexus.routing._pg_store import PgRouteStore

        return PgRouteStore(ledger)
    from nexus.routing._sqlite_store import SqliteRouteStore

    return SqliteRouteStore(ledger)
