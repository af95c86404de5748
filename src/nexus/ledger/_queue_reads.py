"""The reads of the queue (and its one read-then-fail sweep), inside the caller's transaction.

Every queue row is decoded by ``_queue_rows._item``; the SQL here picks rows through the small
partial indexes of unfinished and failed items (see ``_schema``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from nexus.ledger._claims import held_by_others
from nexus.ledger._queue_rows import _ITEM_COLUMNS, REPLY_SUFFIX, _item, _placeholders, move_items
from nexus.ledger._rows import in_lists
from nexus.ledger._schema import PENDING
from nexus.ledger.records import QueueItem

Held = Callable[[str, str, str], bool]
"""``held(agent_id, session_label, item_id)``: True for a row the caller already holds in memory."""

Arriving = Callable[[str], bool]
"""``arriving(message_id)``: True for a message the caller is queueing itself right now (its accept committed,
its sender not yet resumed to hold it)."""


def queued_after(
    conn: Any, rowid: int, held: Held | None, arriving: Arriving | None = None
) -> tuple[list[QueueItem], int]:
    """Items still ``queued`` inserted after ``rowid``, and the new cursor (one snapshot: call in one read).

    Only the keys of waiting rows are read first, and whole rows only of those neither ``held`` nor
    ``arriving``. The cursor is the newest rowid, or just before the first ``arriving`` row: that row is
    looked at again next time, so one whose sender stopped before holding it (a cancelled send) is
    still returned then.
    """
    keys = conn.execute(
        "SELECT rowid, id, agent_id, session_label, message_id FROM queue_items"
        " WHERE rowid > ? AND agent_id IS NOT NULL AND +status = 'queued' ORDER BY rowid",
        (rowid,),
    ).fetchall()
    wanted: list[int] = []
    first_arriving: int | None = None
    for key in keys:
        if held is not None and held(key[2], key[3], key[1]):
            continue
        if arriving is not None and key[4] is not None and arriving(key[4]):
            first_arriving = key[0] if first_arriving is None else first_arriving
            continue
        wanted.append(key[0])
    rows: list[tuple[Any, ...]] = []
    for chunk, marks in in_lists(wanted):
        sql = f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE rowid IN ({marks}) ORDER BY rowid"
        rows.extend(conn.execute(sql, chunk).fetchall())
    if first_arriving is not None:
        return [_item(row) for row in rows], first_arriving - 1
    newest = conn.execute("SELECT MAX(rowid) FROM queue_items").fetchone()[0]
    return [_item(row) for row in rows], max(rowid, int(newest or 0))


def last_rowid(conn: Any) -> int:
    """The newest queue row's rowid (0 for none)."""
    return int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM queue_items").fetchone()[0])


def unanswered_replies(conn: Any) -> list[tuple[QueueItem, str]]:
    """Finished items (delivered or failed) whose sender asked for the reply later and got none yet,
    each with the agent to answer (``metadata.reply_to``)."""
    columns = ", ".join("q." + column.strip() for column in _ITEM_COLUMNS.split(","))
    rows = conn.execute(
        f"SELECT {columns} FROM queue_items q INDEXED BY queue_items_awaiting_reply"
        " WHERE q.awaits_reply = 1 AND q.status IN ('delivered', 'failed') AND q.agent_id IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM queue_items r WHERE r.message_id = q.message_id || '{REPLY_SUFFIX}')"
        " ORDER BY q.enqueued_at, q.id"
    ).fetchall()
    out: list[tuple[QueueItem, str]] = []
    for row in rows:
        try:
            item = _item(row)
        except json.JSONDecodeError:  # a damaged row asks nothing we can read
            continue
        metadata = item.message.get("metadata") if isinstance(item.message, dict) else None
        asker = metadata.get("reply_to") if isinstance(metadata, dict) else None
        if asker is not None:
            out.append((item, str(asker)))
    return out


def get(conn: Any, item_id: str) -> QueueItem | None:
    """One queue item by id, or ``None``."""
    row = conn.execute(f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE id = ?", (item_id,)).fetchone()
    return None if row is None else _item(row)


def get_many(conn: Any, item_ids: Sequence[str]) -> list[QueueItem | None]:
    """The items of ``item_ids``, in that order, ``None`` for an unknown id: one statement per 500 ids."""
    found: dict[str, QueueItem] = {}
    for chunk, marks in in_lists(list(dict.fromkeys(item_ids))):
        for row in conn.execute(f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE id IN ({marks})", chunk).fetchall():
            item = _item(row)
            found[item.id] = item
    return [found.get(item_id) for item_id in item_ids]


def pending(conn: Any, agent_id: str | None, session_label: str | None = None) -> list[QueueItem]:
    """Items still ``queued`` or ``processing`` (of one agent or session, or all), in arrival order.

    ``+agent_id`` keeps the planner on the index of unfinished items whatever indexes on the agent exist.
    """
    sql = f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE {PENDING}"
    args: tuple[object, ...] = ()
    if agent_id is not None:
        sql += " AND +agent_id = ?"
        args = (agent_id,)
    if session_label is not None:
        sql += " AND +session_label = ?"
        args = (*args, session_label)
    return [_item(row) for row in conn.execute(sql + " ORDER BY enqueued_at, id", args).fetchall()]


def items(conn: Any, agent_id: str | None, statuses: Sequence[str]) -> list[QueueItem]:
    """Queue rows filtered by agent and status (every status when ``statuses`` is empty), oldest first.

    Unfinished and failed items are read through their own small indexes (``nexus queue list``'s
    default: queued, processing, failed); any other status scans the table (an occasional question).
    """
    wanted = set(statuses)
    queries: list[tuple[str, list[object]]] = []
    if not wanted or not wanted <= {"queued", "processing", "failed"}:
        queries.append(_items_query(agent_id, statuses, "agent_id = ?"))
    else:
        unfinished = [status for status in statuses if status != "failed"]
        if unfinished:  # +agent_id: the pending index whatever else indexes the agent
            queries.append(_items_query(agent_id, unfinished, "+agent_id = ?", PENDING))
        if "failed" in wanted:  # named: without statistics SQLite may prefer another index
            failed = _items_query(agent_id, (), "agent_id = ?", "status = 'failed'", index="queue_items_failed")
            queries.append(failed)
    found = [_item(row) for sql, args in queries for row in conn.execute(sql, args).fetchall()]
    return sorted(found, key=lambda item: (item.enqueued_at, item.id)) if len(queries) > 1 else found


def _items_query(
    agent_id: str | None, statuses: Sequence[str], agent_term: str, *extra: str, index: str | None = None
) -> tuple[str, list[object]]:
    """The SQL and arguments of one :func:`items` read (``agent_term`` names the agent)."""
    where: list[str] = ["agent_id IS NOT NULL", *extra]
    args: list[object] = []
    if agent_id is not None:
        where.append(agent_term)
        args.append(agent_id)
    if statuses:
        where.append(f"status IN ({_placeholders(statuses)})" if len(statuses) > 1 else "status = ?")
        args.extend(statuses)
    source = f"queue_items INDEXED BY {index}" if index else "queue_items"
    return f"SELECT {_ITEM_COLUMNS} FROM {source} WHERE {' AND '.join(where)} ORDER BY enqueued_at, id", args


def fail_exhausted(conn: Any, max_attempts: int) -> list[QueueItem]:
    """Fail every ``processing`` item (a crash cut its run) already tried ``max_attempts`` times.

    An item another live broker is running is not a crash's leftover: it is left to that broker.
    """
    rows = conn.execute(
        f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE {PENDING} AND status = 'processing' AND attempts >= ?",
        (max_attempts,),
    ).fetchall()
    found = [_item(row) for row in rows]
    running = held_by_others(conn, [item.id for item in found])
    found = [item for item in found if item.id not in running]
    reason = f"its run was cut {max_attempts} times (the process died); not retried again"
    move_items(conn, [item.id for item in found], "failed", error=reason)
    return found
