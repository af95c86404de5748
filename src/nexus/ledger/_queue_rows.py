"""One broker queue item in ``agents.db``: its row as the broker sees it, and the writes that accept and
move it inside a caller's transaction.

They take a connection rather than a store so the queue store's group commit (``_queue_store``) can
do many in one transaction, and the engine can mark items delivered in the transaction that writes
their turn (:func:`deliver_pending_in`). :class:`~nexus.ledger.broker_store.BrokerStore` builds its
one-call methods on them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from json.encoder import encode_basestring
from typing import Any

from nexus.ledger._claims import claim_in as claim_items
from nexus.ledger._rows import dumps, dumps_opt, is_postgres, loads_opt
from nexus.ledger._schema import PENDING
from nexus.ledger._ulid import new_ulid
from nexus.ledger.errors import AgentRemovedError, LedgerError, QueueItemsFinishedError
from nexus.ledger.records import AcceptRequest, Lease, QueueItem
from nexus.llm import now_ms

_ITEM_COLUMNS = (
    "id, session_label, agent_id, message_id, sender, message_json, mode, status, attempts, enqueued_at, "
    "started_at, completed_at, error, turn_id"
)


def _item(row: tuple[Any, ...]) -> QueueItem:
    return QueueItem(
        id=row[0],
        session_label=row[1],
        agent_id=row[2],
        message_id=row[3],
        sender=row[4],
        message=loads_opt(row[5]),
        mode=row[6],
        status=row[7],
        attempts=row[8],
        enqueued_at=row[9],
        started_at=row[10],
        completed_at=row[11],
        error=row[12],
        turn_id=row[13],
    )


def accept_in(conn: sqlite3.Connection, request: AcceptRequest) -> tuple[QueueItem, bool]:
    """Accept one message inside the caller's transaction; ``created`` is False for a known id."""
    return accept_at(conn, request, now_ms())


_INSERT_ITEM = (
    "INSERT INTO queue_items (id, session_label, agent_id, message_id, sender, message_json, mode, status,"
    " enqueued_at, awaits_reply) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)"
    " ON CONFLICT(message_id) WHERE message_id IS NOT NULL DO NOTHING"
)

REPLY_SUFFIX = ":reply"
"""A reply's message id is the asking message's id and this (``nexus.broker._replies``)."""


_WIRE_KEYS = ("id", "from", "to", "content", "timestamp", "conversation_id", "metadata")
"""The keys of a broker message's wire form without a session key (``AgentMessage.to_json``), in its order."""


def message_json(message: object) -> str:
    """``dumps(message)``, the text a queue row stores; a broker message's usual wire form (:data:`_WIRE_KEYS`, text
    fields, an ``int`` time, a conversation id or none) is written out directly, the same text: the generic
    encoder takes a list of some thirty pieces and joins them, ~2 us of every message, three times this."""
    if type(message) is not dict or tuple(message) != _WIRE_KEYS:
        return dumps(message)
    message_id, sender, to, content, timestamp, conversation, metadata = message.values()
    if not (
        type(message_id) is str and type(sender) is str and type(to) is str and type(content) is str
        and type(timestamp) is int and (conversation is None or type(conversation) is str) and type(metadata) is dict
    ):  # fmt: skip
        return dumps(message)
    enc = encode_basestring
    return (
        f'{{"id":{enc(message_id)},"from":{enc(sender)},"to":{enc(to)},"content":{enc(content)},'
        f'"timestamp":{timestamp},"conversation_id":{"null" if conversation is None else enc(conversation)},'
        f'"metadata":{dumps(metadata) if metadata else "{}"}}}'
    )


def _awaits_reply(message: Any) -> int | None:
    """1 when the sender asked for the reply later (``metadata.reply_to``): the row is flagged until it comes."""
    metadata = message.get("metadata") if isinstance(message, dict) else None
    return 1 if isinstance(metadata, dict) and metadata.get("reply_to") else None


def accept_at(conn: sqlite3.Connection, request: AcceptRequest, now: int) -> tuple[QueueItem, bool]:
    """:func:`accept_in` with the time of acceptance given (a group shares one clock read).

    A message for an agent the registry says was removed is refused, in the accept's own transaction
    (:class:`AgentRemovedError`; a known id still answers its first acceptance): see :func:`removed_in`.
    """
    if removed_in(conn, (request.agent_id,)):
        return _first_or_refused(conn, request), False
    return _insert(conn, request, now)


def _insert(conn: Any, request: AcceptRequest, now: int) -> tuple[QueueItem, bool]:
    """One message's row (its agent checked by the caller). One statement for a new message: the item is built
    from what was written, not read back.

    The unique index on ``message_id`` decides idempotence (``rowcount`` 0: a known id); only
    then is the first acceptance read. The item's ``message`` is the caller's object itself.
    """
    if request.session_key is not None:  # a per-sender session: created with its first message
        _ensure_keyed_session(conn, request.session_label, request.session_key, request.agent_id, now)
    item_id = new_ulid()
    cursor = conn.execute(
        _INSERT_ITEM,
        (item_id, request.session_label, request.agent_id, request.message_id, request.sender,
         message_json(request.message), request.mode, now, _awaits_reply(request.message)),
    )  # fmt: skip
    if cursor.rowcount == 0:  # a known message id: the first acceptance stands
        return _first_acceptance(conn, request.message_id), False
    _after_insert(conn, request, now)
    return _new_item(item_id, request, now), True


_REMOVED = "SELECT 1 FROM agents WHERE id = ? AND status = 'removed'"


def removed_in(conn: Any, agent_ids: Collection[str]) -> bool:
    """Whether the registry says one of these agents was removed: read in the transaction that accepts their
    messages, once for a whole group of accepts (an indexed read; on PostgreSQL one round trip a group).

    Against an agent's removal (it counts the agent's waiting messages, then marks it removed) that is enough on
    both backends: SQLite runs one write transaction at a time, so the removal committed before the accept, or
    waits until it committed and then counts its message; PostgreSQL runs both ``SERIALIZABLE``, and an accept
    and a removal that each missed the other's write form a cycle it refuses (one runs again and sees the other).
    An agent the registry never had is not refused (a queue may serve ids it does not list).
    """
    if len(agent_ids) == 1:
        return conn.execute(_REMOVED, tuple(agent_ids)).fetchone() is not None
    marks = ", ".join("?" * len(agent_ids))
    query = f"SELECT 1 FROM agents WHERE id IN ({marks}) AND status = 'removed' LIMIT 1"
    return conn.execute(query, tuple(agent_ids)).fetchone() is not None


def _first_or_refused(conn: Any, request: AcceptRequest) -> QueueItem:
    """The first acceptance of a message id the insert met, or :class:`AgentRemovedError` when none exists (the
    insert wrote nothing because the message's agent was removed)."""
    item = accepted(conn, request.message_id)
    if item is None:
        raise AgentRemovedError(request.agent_id)
    return item


def accepted(conn: Any, message_id: str) -> QueueItem | None:
    """The item message ``message_id`` was accepted as, or ``None`` (never sent, or refused: its id freed)."""
    row = conn.execute(f"SELECT {_ITEM_COLUMNS} FROM queue_items WHERE message_id = ?", (message_id,)).fetchone()
    return None if row is None else _item(row)


def _first_acceptance(conn: Any, message_id: str) -> QueueItem:
    """The item a known message id was first accepted as (the insert just met it: its acceptance stands)."""
    item = accepted(conn, message_id)
    assert item is not None, f"message id {message_id!r} met by the insert of this same transaction"
    return item


def _new_item(item_id: str, request: AcceptRequest, now: int) -> QueueItem:
    """The item just inserted, built from what was written (its ``message`` is the caller's object itself)."""
    return QueueItem(
        item_id, request.session_label, request.agent_id, request.message_id, request.sender, request.message,
        request.mode, "queued", 0, now, None, None, None, None,
    )  # fmt: skip


def _after_insert(conn: Any, request: AcceptRequest, now: int) -> None:
    """What a new message writes besides its row: its ask answered (a reply), the agent-to-agent log."""
    if request.message_id.endswith(REPLY_SUFFIX):  # the reply is queued: its ask waits no more
        conn.execute(
            "UPDATE queue_items SET awaits_reply = NULL WHERE message_id = ? AND awaits_reply = 1",
            (request.message_id[: -len(REPLY_SUFFIX)],),
        )
    if request.log_as_agent_message:
        message = request.message
        content = message.get("content", "") if isinstance(message, dict) else str(message)
        metadata = {"conversation_id": message.get("conversation_id")} if isinstance(message, dict) else None
        conn.execute(
            "INSERT INTO broker_messages (id, from_agent, to_agent, session_label, content, status,"
            " created_at, metadata_json) VALUES (?, ?, ?, ?, ?, 'sent', ?, ?)",
            (request.message_id, request.sender, request.agent_id, request.session_label, content, now,
             dumps_opt(metadata)),
        )  # fmt: skip


def accept_many_at(conn: Any, requests: Sequence[AcceptRequest], now: int) -> list[tuple[QueueItem, bool]]:
    """:func:`accept_at` for each of ``requests`` in order (their agents read once: :func:`removed_in`); on
    PostgreSQL the new rows go in as one statement.

    A round trip per row is what an accept costs there, so a group's inserts are one multi-row ``INSERT``
    whose ``RETURNING`` says which rows were new: a known message id (or one twice in the group) inserts
    nothing and its first acceptance is read back, as in :func:`accept_at`. SQLite runs in-process: one
    statement per row costs nothing extra there.
    """
    if removed_in(conn, {request.agent_id for request in requests}):  # one read for the group (see there)
        return [accept_at(conn, request, now) for request in requests]  # a removed agent's: refused alone
    if len(requests) < 2 or not is_postgres(conn):
        return [_insert(conn, request, now) for request in requests]
    for request in requests:
        if request.session_key is not None:
            _ensure_keyed_session(conn, request.session_label, request.session_key, request.agent_id, now)
    rows = [
        (new_ulid(), r.session_label, r.agent_id, r.message_id, r.sender, message_json(r.message), r.mode, now,
         _awaits_reply(r.message))
        for r in requests
    ]  # fmt: skip
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)"] * len(rows))
    created = {
        str(row[0])
        for row in conn.execute(
            _INSERT_ITEM.replace("(?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)", values) + " RETURNING id",
            [value for row in rows for value in row],
        ).fetchall()
    }
    outcomes: list[tuple[QueueItem, bool]] = []
    for request, row in zip(requests, rows, strict=True):
        if row[0] not in created:
            outcomes.append((_first_acceptance(conn, request.message_id), False))
            continue
        _after_insert(conn, request, now)
        outcomes.append((_new_item(str(row[0]), request, now), True))
    return outcomes


def _ensure_keyed_session(conn: sqlite3.Connection, label: str, key: str, agent_id: str, now: int) -> None:
    """Create the session of a per-sender key once; refuse a label that another key (or a user) owns."""
    created = conn.execute(
        "INSERT INTO sessions (label, routing_key, origin, created_at, updated_at, metadata_json)"
        " VALUES (?, ?, 'broker', ?, ?, ?) ON CONFLICT(label) DO NOTHING",
        (label, key, now, now, dumps({"agent": agent_id})),
    ).rowcount
    if not created:
        row = conn.execute("SELECT routing_key FROM sessions WHERE label = ?", (label,)).fetchone()
        if row is not None and row[0] != key:
            raise ValueError(f"session {label!r} exists and is not the session of key {key!r}; rename that session")


def _is_op_error(exc: LedgerError) -> bool:
    """An error one op raised on purpose (a finished item), not the database failing as a whole."""
    from nexus.ledger.errors import LedgerBusyError

    if isinstance(exc, QueueItemsFinishedError):  # finished, or held by another broker
        return True
    return not isinstance(exc, LedgerBusyError) and "queue items already finished or unknown" in str(exc)


def _placeholders(ids: Sequence[str]) -> str:
    return ", ".join("?" * len(ids))


def claim_in(conn: sqlite3.Connection, item_ids: Sequence[str], lease: Lease | None = None) -> None:
    """A run takes these items (inside the caller's transaction): ``processing``, one more attempt, stamped
    with this broker; an item another live broker holds is refused (:mod:`nexus.ledger._claims`). Under a
    ``lease``, the lease is checked first (``LeaseLostError``) and its epoch stamped on the items."""
    if lease is None:
        claim_items(conn, item_ids)
        return
    from nexus.ledger._leases import check_in

    check_in(conn, lease)
    claim_items(conn, item_ids, lease.epoch)


def release_in(conn: sqlite3.Connection, item_ids: Sequence[str]) -> None:
    """Items handed back unconsumed (inside the caller's transaction): ``queued``, the attempt taken back."""
    move_items(conn, item_ids, "queued", bump=-1)


def deliver_in(conn: sqlite3.Connection, item_ids: Sequence[str], turn_id: str) -> None:
    """Items consumed by ``turn_id``, inside the transaction that writes the turn."""
    move_items(conn, item_ids, "delivered", turn_id=turn_id)


def deliver_pending_in(conn: sqlite3.Connection, item_ids: Sequence[str], turn_id: str) -> int:
    """Like :func:`deliver_in` but lenient: items already finished are skipped; returns how many moved.

    Used inside ``write_turn``, where refusing would lose the turn over its bookkeeping.
    """
    if not item_ids:
        return 0
    cursor = conn.execute(
        f"UPDATE queue_items SET status = 'delivered', completed_at = ?, turn_id = ?"
        f" WHERE id IN ({_placeholders(item_ids)}) AND +status IN ('queued', 'processing')",
        (now_ms(), turn_id, *item_ids),
    )
    return cursor.rowcount


def move_items(
    conn: sqlite3.Connection,
    item_ids: Sequence[str],
    status: str,
    *,
    bump: int = 0,
    turn_id: str | None = None,
    error: str | None = None,
) -> None:
    """Move unfinished items to ``status``; :class:`QueueItemsFinishedError` names any already finished or unknown.

    Only a waiting item is ``dropped``: the cap and a cleared queue drop what waits, and a ``processing`` row is a
    run's (on a database several brokers share, maybe another broker's, whose view the dropping broker's stale
    one is not); it is named in the error with its status, like a finished one, and stays as it is.

    ``+status`` keeps the status term off the indexes: with a few dozen ids SQLite's planner
    otherwise prefers ``queue_items_pending`` and walks every unfinished item instead of looking
    each id up by its primary key.
    """
    if not item_ids:
        return
    now = now_ms()
    final = status in ("delivered", "failed", "dropped")
    movable = _WAITING if status == "dropped" else _UNFINISHED
    cursor = conn.execute(
        f"UPDATE queue_items SET status = ?, attempts = CASE WHEN attempts + ? < 0 THEN 0 ELSE attempts + ? END,"
        f" started_at = CASE WHEN ? = 1 THEN ? ELSE started_at END,"
        f" completed_at = ?, turn_id = COALESCE(?, turn_id), error = COALESCE(?, error)"
        f" WHERE id IN ({_placeholders(item_ids)}) AND +status IN ({', '.join(map(repr, movable))})",
        (status, bump, bump, int(status == "processing"), now, now if final else None, turn_id, error, *item_ids),
    )
    if cursor.rowcount != len(set(item_ids)):
        found = conn.execute(
            f"SELECT id, status, completed_at FROM queue_items WHERE id IN ({_placeholders(item_ids)})",
            tuple(item_ids),
        ).fetchall()
        # Read inside the move's transaction (rolled back by the error): a row this UPDATE moved shows its new
        # status, so it is told from one finished before by its completed_at, this move's. Named as finished, it
        # was left out of the caller's retry with the rest (a cap's drop of one waiting and one finished row
        # dropped neither).
        states = {row[0]: row[1] for row in found if not (final and row[1] == status and row[2] == now)}
        moved = {row[0] for row in found} - states.keys()
        bad = {i: states.get(i, "missing") for i in item_ids if i not in moved and states.get(i) not in movable}
        raise QueueItemsFinishedError(status, bad)


_UNFINISHED = ("queued", "processing")
_WAITING = ("queued",)


def free_message_ids_in(conn: sqlite3.Connection, item_ids: Sequence[str]) -> None:
    """Free the message ids of refused items (their rows stay ``dropped``): the sender was told "not queued", so
    its retry with the same id must be queued, not answered as a duplicate of the refusal. The id stays in the
    row's stored message (``message_json``)."""
    conn.execute(f"UPDATE queue_items SET message_id = NULL WHERE id IN ({_placeholders(item_ids)})", tuple(item_ids))


def owe_overflow_in(conn: sqlite3.Connection, item_ids: Sequence[str], cap: int) -> None:
    """Mark dropped items as owed to their session's next ``[Queue overflow]`` summary, with the cap in force."""
    conn.execute(
        f"UPDATE queue_items SET overflow_cap = ? WHERE id IN ({_placeholders(item_ids)}) AND status = 'dropped'",
        (cap, *item_ids),
    )


def owed_overflow_in(
    conn: sqlite3.Connection, session_label: str, batch: Sequence[str]
) -> tuple[list[tuple[QueueItem, int]], list[str]]:
    """The dropped items a turn of the messages ``batch`` owes a summary of (oldest first, each with its cap): those
    no turn took yet, and those a turn of one of these messages took (its retry); and the marks to clear, of
    items whose carrier is finished (its turn told them)."""
    rows = conn.execute(
        f"SELECT {_ITEM_COLUMNS}, overflow_cap, overflow_to FROM queue_items INDEXED BY queue_items_overflow"
        " WHERE session_label = ? AND overflow_cap IS NOT NULL ORDER BY enqueued_at, id",
        (session_label,),
    ).fetchall()
    carriers = {str(row[-1]) for row in rows if row[-1] is not None and row[-1] not in batch}
    unfinished = set()
    if carriers:
        marks = _placeholders(list(carriers))
        found = conn.execute(f"SELECT id FROM queue_items WHERE id IN ({marks}) AND {PENDING}", tuple(carriers))
        unfinished = {str(row[0]) for row in found.fetchall()}
    owed = [(_item(row), int(row[-2])) for row in rows if row[-1] is None or row[-1] in batch]
    told = [str(row[0]) for row in rows if row[-1] is not None and row[-1] not in batch and row[-1] not in unfinished]
    return owed, told


def take_overflow_in(conn: sqlite3.Connection, session_label: str, batch: Sequence[str]) -> list[tuple[QueueItem, int]]:
    """:func:`owed_overflow_in`, the owed items then carried by the batch's first message, the told ones cleared."""
    owed, told = owed_overflow_in(conn, session_label, batch)
    if owed:
        ids = [item.id for item, _ in owed]
        conn.execute(f"UPDATE queue_items SET overflow_to = ? WHERE id IN ({_placeholders(ids)})", (batch[0], *ids))
    if told:
        conn.execute(
            f"UPDATE queue_items SET overflow_cap = NULL, overflow_to = NULL WHERE id IN ({_placeholders(told)})",
            tuple(told),
        )
    return owed
