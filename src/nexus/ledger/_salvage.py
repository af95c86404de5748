"""What ``nexus db copy`` still reads of a damaged SQLite ledger, and how the copy's references are made whole.

A damaged page (a disk error, a file overwritten in part) makes SQLite stop a scan there with "database disk
image is malformed"; a plain copy then copies nothing. :class:`SalvageReader` reads each table in key order on
its own read-only connection and, where a read stops, seeks past the damage (the first key from which the table
reads again: found by doubling, then halving, the step from the last row read) and goes on, so every row on a
whole page is copied and the unreadable ranges are counted. Rowid tables are read by rowid without their
indexes (a damaged index hides no row); the two ``WITHOUT ROWID`` tables are read whole, else key by key for
the keys the copied turns name. Pure Python: the ``sqlite3`` shell's ``.recover`` is not needed.

Rows that refer to a lost row are then made whole in the target (:func:`repair_references`), so its foreign
keys hold: see docs/ledger.md ("A copy of a damaged file").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass

_FIRST = -(2**63)
"""Below every rowid (SQLite's smallest rowid is this plus one in practice)."""
_LAST = 2**63 - 1
_DAMAGE = (11, 26)
"""SQLITE_CORRUPT and SQLITE_NOTADB: what a damaged page raises (other errors stop the copy)."""
_BY_KEY = {"turn_journal": ("turn_id", "id"), "system_prompts": ("hash", "system_prompt_hash")}
"""``WITHOUT ROWID`` tables: the key column, and the column of the copied turns that names its keys."""


@dataclass(slots=True)
class Loss:
    """What of one table could not be read: unreadable key ranges, damaged rows (a row whose key reads but not
    its content, or whose text no longer decodes: left out, never copied as if whole), and all the rows lost when
    the table's count still reads (through an index), else ``None``."""

    ranges: int = 0
    damaged: int = 0
    rows: int | None = None

    def describe(self, table: str) -> str:
        """E.g. ``turns: 28 rows`` or ``messages: 2 unreadable ranges``."""
        if self.rows is not None:
            return f"{table}: {_many(self.rows, 'row')}"
        parts = [_many(self.ranges, "unreadable range")] if self.ranges else []
        return f"{table}: {' + '.join([*parts, _many(self.damaged, 'damaged row')] if self.damaged else parts)}"


def _many(count: int, what: str) -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"


class _Garbled:
    """A text value whose bytes are not UTF-8 (a damaged cell that still parses): its row is left out."""


_GARBLED = _Garbled()
_UNREADABLE = object()
"""A seek that met a damaged page."""


def _text(raw: bytes) -> Any:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return _GARBLED


def is_damage(exc: sqlite3.Error) -> bool:
    """A damaged file's error (not a busy database, a missing table or a full disk)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _DAMAGE


class SalvageReader:
    """Reads what still reads of an SQLite ledger file, on its own read-only connection, in one snapshot."""

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        self._conn.text_factory = _text
        self._conn.execute("BEGIN")
        self.lost: dict[str, Loss] = {}
        self._named: dict[str, set[Any]] = {}
        self._last = _LAST

    def close(self) -> None:
        """End the snapshot (a rollback: a read whose COMMIT would report the damage again) and close."""
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        self._conn.close()

    def rows(self, table: str, columns: str) -> Iterator[tuple[Any, ...]]:
        """Every row of ``table`` that reads; what does not is counted in :attr:`lost` (reset per call)."""
        self.lost.pop(table, None)
        loss, read = Loss(), 0
        names = columns.split(", ")
        keep = [(c, names.index(c)) for _, c in _BY_KEY.values()] if table == "turns" else []
        reads = self._keyed(table, columns, loss) if table in _BY_KEY else self._by_rowid(table, columns, loss)
        for row in reads:
            if any(value is _GARBLED for value in row):
                loss.damaged += 1
                continue
            read += 1
            for column, at in keep:
                self._named.setdefault(column, set()).add(row[at])
            yield row
        if loss.ranges or loss.damaged:
            loss.rows = self._missing(table, read)
            self.lost[table] = loss

    def _by_rowid(self, table: str, columns: str, loss: Loss) -> Iterator[tuple[Any, ...]]:
        sql = f"SELECT rowid, {columns} FROM {table} NOT INDEXED WHERE rowid > ? ORDER BY rowid"
        after, self._last = _FIRST, self._largest(table)
        while True:
            try:
                for row in self._conn.execute(sql, (after,)):
                    if not after < row[0] <= self._last:  # out of order: a damaged page that still parses
                        break
                    after = row[0]
                    yield tuple(row[1:])
                else:
                    if after >= self._last:
                        return
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
            for row in self._one_by_one(sql, after):  # a scan reads one row ahead: the last whole rows
                after = row[0]
                yield tuple(row[1:])
            following = self._next_key(table, after)
            if following is None and after >= self._last:
                return
            if isinstance(following, int):  # its key reads, its row does not (a damaged cell or overflow page)
                loss.damaged += 1
                after = following
                continue
            loss.ranges += 1
            resume = self._past_damage(table, after)
            if resume is None:
                return
            after = resume  # its row, first past the damage, a seek from below cannot reach: read it by key
            yield from self._exactly(table, columns, resume)

    def _first(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        """The first row ``sql`` reads (``None``: no row), or ``_UNREADABLE`` where it meets a damaged page."""
        try:
            return self._conn.execute(sql, parameters).fetchone()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            return _UNREADABLE

    def _exactly(self, table: str, columns: str, rowid: int) -> Iterator[tuple[Any, ...]]:
        found = self._first(f"SELECT {columns} FROM {table} NOT INDEXED WHERE rowid = ?", (rowid,))
        if found is not None and found is not _UNREADABLE:
            yield tuple(found)

    def _one_by_one(self, sql: str, after: int) -> Iterator[tuple[Any, ...]]:
        """The rows after ``after`` read one statement each, up to the first that does not read."""
        while True:
            row = self._first(f"{sql} LIMIT 1", (after,))
            if row is None or row is _UNREADABLE or not after < row[0] <= self._last:
                return
            after = row[0]
            yield tuple(row)

    def _next_key(self, table: str, after: int) -> object:
        """The rowid of the row after ``after`` (``None``: none), or ``_UNREADABLE`` when the seek meets damage."""
        found = self._first(f"SELECT rowid FROM {table} NOT INDEXED WHERE rowid > ? ORDER BY rowid LIMIT 1", (after,))
        if found is None or found is _UNREADABLE:
            return found
        return int(found[0]) if after < found[0] <= self._last else _UNREADABLE  # a damaged page that parses

    def _largest(self, table: str) -> int:
        """The largest rowid of ``table``, read down its rightmost pages (``_LAST`` if they are damaged): a key
        past it is a damaged page's garbage, and a scan that stops before it without an error (a damaged page
        that still parses) has not reached the table's end."""
        found = self._first(f"SELECT max(rowid) FROM {table}", ())
        if found is _UNREADABLE:
            return _LAST
        return _FIRST if found[0] is None else int(found[0])

    def _past_damage(self, table: str, after: int) -> int | None:
        """The smallest rowid past ``after`` from which ``table`` reads again; ``None``: nothing past it does."""

        def reads_from(rowid: int) -> bool:
            return isinstance(self._next_key(table, rowid), int)

        bad, step = after, 1
        while not reads_from(good := min(after + step, _LAST)):
            if good == _LAST:
                return None
            bad, step = good, step * 2
        while good - bad > 1:
            mid = (bad + good) // 2
            bad, good = (bad, mid) if reads_from(mid) else (mid, good)
        return good

    def _keyed(self, table: str, columns: str, loss: Loss) -> Iterator[tuple[Any, ...]]:
        """A ``WITHOUT ROWID`` table: whole if it reads, else the keys the copied turns name, one by one."""
        key, named_by = _BY_KEY[table]
        at = columns.split(", ").index(key)
        seen: set[tuple[Any, ...]] = set()
        try:
            for row in self._conn.execute(f"SELECT {columns} FROM {table} ORDER BY {key}"):
                seen.add(tuple(row))
                yield tuple(row)
            return
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
        for value in sorted(v for v in self._named.get(named_by, set()) if v is not None):
            try:
                found = self._conn.execute(f"SELECT {columns} FROM {table} WHERE {key} = ?", (value,)).fetchall()
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                loss.ranges += 1
                continue
            yield from (tuple(row) for row in found if tuple(row) not in seen and row[at] == value)
        loss.ranges = max(loss.ranges, 1)

    def _missing(self, table: str, read: int) -> int | None:
        """Rows of ``table`` not read, when its count still reads (through an index), else ``None``."""
        try:
            total = int(self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        except sqlite3.DatabaseError:
            return None
        return max(total - read, 0) or None


_REPAIRS: tuple[tuple[str, str], ...] = (
    (
        "segments rebuilt for their turns",
        "INSERT INTO segments (id, parent_segment_id, parent_seq, root_turn_id)"
        " SELECT t.segment_id, NULL, NULL, MIN(t.id) FROM turns t"
        " WHERE NOT EXISTS (SELECT 1 FROM segments s WHERE s.id = t.segment_id) GROUP BY t.segment_id",
    ),
    (
        "forks whose parent segment was lost made roots",
        "UPDATE segments SET parent_segment_id = NULL, parent_seq = NULL WHERE parent_segment_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM segments p WHERE p.id = segments.parent_segment_id)",
    ),
    (
        "turns whose parent turn was lost",
        "UPDATE turns SET parent_turn_id = NULL WHERE parent_turn_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM turns p WHERE p.id = turns.parent_turn_id)",
    ),
    (
        "journal entries of lost turns dropped",
        "DELETE FROM turn_journal WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = turn_journal.turn_id)",
    ),
    (
        "compactions of lost turns dropped",
        "DELETE FROM compactions WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = compactions.turn_id)",
    ),
    (
        "deliveries of lost turns",
        "UPDATE deliveries SET turn_id = NULL WHERE turn_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = deliveries.turn_id)",
    ),
    (
        "sessions rebuilt from their turns and queue",
        "INSERT INTO sessions (label, thread_id, created_at, updated_at)"
        " SELECT refs.label, (SELECT t.id FROM turns t WHERE t.session_label = refs.label"
        " ORDER BY t.started_at DESC, t.id DESC LIMIT 1), MIN(refs.at), MAX(refs.at) FROM ("
        "SELECT session_label AS label, started_at AS at FROM turns"
        " UNION ALL SELECT session_label, enqueued_at FROM queue_items"
        " UNION ALL SELECT session_label, changed_at FROM session_history"
        " UNION ALL SELECT session_label, created_at FROM session_aliases) refs"
        " WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.label = refs.label) GROUP BY refs.label",
    ),
    (
        "sessions whose head turn was lost (now their newest remaining turn, if any)",
        "UPDATE sessions SET thread_id = (SELECT t.id FROM turns t WHERE t.session_label = sessions.label"
        " ORDER BY t.started_at DESC, t.id DESC LIMIT 1) WHERE thread_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = sessions.thread_id)",
    ),
)
"""In order (a rebuilt segment or session is there before what refers to it is checked)."""


def repair_references(dst: Any) -> dict[str, int]:
    """In the target's transaction, after a copy that lost rows: make every reference to a lost row whole.

    Nothing is invented but what keeps the conversations reachable: a lost segment or session comes back as
    a bare row (a root segment; a session with default settings, its head its newest turn) rebuilt from the
    rows that name it; a pointer to a lost turn is cleared (a session's head: its newest remaining turn); a
    lost turn's journal and compaction rows go with it. Returns how many rows each repair changed (non-zero)."""
    done: dict[str, int] = {}
    for what, sql in _REPAIRS:
        changed = dst.execute(sql).rowcount
        if changed and changed > 0:
            done[what] = int(changed)
    return done
