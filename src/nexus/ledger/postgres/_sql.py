"""The ledger's SQL, written for SQLite, as PostgreSQL takes it; and a connection that does the rewrite.

The stores' SQL is one text for both backends: the few SQLite-only spellings in it are planner hints
that change no result (``+column`` keeps a term off an index, ``INDEXED BY`` names one), so they are
dropped here, and ``?`` parameters become psycopg's ``%s``. Each statement is rewritten once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

_HINT = re.compile(r"(?<=[\s(])\+(?=[a-z_])")
_INDEXED_BY = re.compile(r"\s+INDEXED BY \w+")
_REWRITTEN: dict[tuple[str, bool], str] = {}


def postgres_sql(sql: str, has_params: bool = True) -> str:
    """``sql`` without SQLite's planner hints; with ``%s`` for ``?`` when it takes parameters."""
    key = (sql, has_params)
    done = _REWRITTEN.get(key)
    if done is None:
        done = _INDEXED_BY.sub("", _HINT.sub("", sql))
        if has_params:
            done = done.replace("%", "%%").replace("?", "%s")
        if len(_REWRITTEN) < 4096:  # statements are few; dynamic IN lists vary in length only
            _REWRITTEN[key] = done
    return done


class PgConnection:
    """A psycopg connection inside one transaction, taking the stores' SQLite-style SQL (``conn.execute``)."""

    __slots__ = ("raw",)

    dialect = "postgresql"
    """Which SQL the few backend-specific statements speak (an SQLite connection has no such attribute)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; returns the psycopg cursor (``fetchone``, ``fetchall``, iteration, ``rowcount``)."""
        if params:
            return self.raw.execute(postgres_sql(sql), tuple(params))
        return self.raw.execute(postgres_sql(sql, False))

    def stream(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """The rows of a query read in pieces through a server-side cursor (a table of any size)."""
        with self.raw.cursor(name="nexus_stream") as cursor:
            cursor.itersize = 2000
            cursor.execute(postgres_sql(sql, False))
            yield from cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        """Run one statement for each row of parameters."""
        cursor = self.raw.cursor()
        cursor.executemany(postgres_sql(sql), [tuple(row) for row in rows])
        return cursor
