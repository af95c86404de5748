"""A read on SQLite does not wait for another thread's write transaction; it reads the last commit.

With more than a few runs active the ledger's writer thread opens turns, and each run starting on the
event loop then waited on the connection's lock for the writer's transaction (its session lock's
``data_version`` and its first reads): the whole loop stood still for it, at every start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from nexus.ledger import Ledger
from nexus.ledger._sqlite import Database

T = TypeVar("T")
WAIT_S = 10.0
"""How long a helper thread may take (a guard against a hung test, not a measurement)."""


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "agents.db")
    database.write(lambda c: c.execute("CREATE TABLE notes (body TEXT)"))
    database.write(lambda c: c.execute("INSERT INTO notes VALUES ('committed')"))
    yield database
    database.close()


def _bodies(conn: object) -> list[str]:
    return [row[0] for row in conn.execute("SELECT body FROM notes ORDER BY rowid")]  # type: ignore[attr-defined]


def _during_open_write(db: Database, ask: Callable[[], T]) -> tuple[T, bool]:
    """``ask()`` on another thread while this test's write transaction is open (it inserted a row, not
    committed yet); returns its answer and whether it came before the write was let go."""
    entered, release = threading.Event(), threading.Event()

    def slow_write(conn: object) -> None:
        conn.execute("INSERT INTO notes VALUES ('uncommitted')")  # type: ignore[attr-defined]
        entered.set()
        release.wait(WAIT_S * 3)

    writer = threading.Thread(target=db.write, args=(slow_write,))
    writer.start()
    assert entered.wait(WAIT_S)
    answers: list[tuple[T, bool]] = []
    asker = threading.Thread(target=lambda: answers.append((ask(), not release.is_set())))
    asker.start()
    asker.join(WAIT_S)  # a read that waits for the write is still blocked here
    release.set()
    asker.join()
    writer.join()
    return answers[0]


def test_a_read_does_not_wait_for_another_threads_write(db: Database) -> None:
    bodies, before_release = _during_open_write(db, lambda: db.read(_bodies))
    assert before_release, "the read waited for the other thread's write transaction"
    assert bodies == ["committed"]  # the last commit, not the open transaction's row
    assert db.read(_bodies) == ["committed", "uncommitted"]  # once it committed, every read sees it


def test_the_others_mark_does_not_wait_for_another_threads_write(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        db = ledger._db
        assert isinstance(db, Database)
        db.write(lambda c: c.execute("CREATE TABLE notes (body TEXT)"))
        mark, before_release = _during_open_write(db, ledger.others_mark)
        assert before_release, "the mark waited for the other thread's write transaction"
        assert mark is None  # cannot tell now: the caller reads instead
        assert ledger.others_mark() == ledger.others_mark() is not None  # our own commits do not move it


def test_a_read_after_another_threads_commit_sees_it(db: Database) -> None:
    _during_open_write(db, lambda: db.read(_bodies))  # the second connection exists from here on
    db.write(lambda c: c.execute("INSERT INTO notes VALUES ('later')"))
    bodies, _ = _during_open_write(db, lambda: db.read(_bodies))
    assert bodies == ["committed", "uncommitted", "later"]
