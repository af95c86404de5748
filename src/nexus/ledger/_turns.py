"""Turn lifecycle inside one transaction: open, journal, write (finish), recover."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger._paths import on_path, path_ranges
from nexus.ledger._rows import dumps, is_postgres, turn_position
from nexus.ledger._schema import pack_key
from nexus.ledger._sessions import resolve_label
from nexus.ledger._ulid import new_ulid
from nexus.ledger._write import (
    TurnOutcome,
    WrittenRows,
    _final_columns,
    _tool_call_rows,
    detail_columns,
    for_update,
    insert_compaction,
    insert_messages,
    insert_tool_calls,
    insert_turn_row,
    move_pointer,
    place,
    session_head,
    update_turn_row,
)
from nexus.ledger.errors import HeadMovedError, LedgerError, TurnNotFound, TurnStateError
from nexus.ledger.records import HEAD, OPEN_STATUSES, CompactionRecord, ToolCallRecord, TurnDetails
from nexus.llm import (
    AssistantContent,
    AssistantMessage,
    Message,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    block_from_dict,
    block_to_dict,
    message_from_dict,
    message_to_dict,
    now_ms,
)


def open_turn(
    conn: sqlite3.Connection,
    session_label: str,
    parent: Any,
    query_messages: Sequence[Message],
    fields: TurnDetails,
    owner: str,
    *,
    source: str | None = None,
    context: dict[str, object] | None = None,
    written: WrittenRows | None = None,
) -> str:
    """Insert a ``streaming`` turn with its query messages (their rows into ``written``); the session pointer
    does not move."""
    now = now_ms()
    session_label, head = _locked_head(conn, session_label)
    parent_id = head if parent is HEAD else parent
    if parent_id != head:
        raise HeadMovedError(session_label, parent_id, head)
    turn_id = new_ulid()
    seg, seq, _ = place(conn, parent_id, turn_id)
    cols: dict[str, object] = {
        "id": turn_id,
        "parent_turn_id": parent_id,
        "segment_id": seg,
        "seq": seq,
        "session_label": session_label,
        "status": "streaming",
        "started_at": now,
        "query_count": len(query_messages),
        "message_count": len(query_messages),
        "owner": owner,
    }
    cols.update(detail_columns(fields))
    insert_turn_row(conn, cols)
    insert_messages(conn, seg, seq, 0, query_messages, source=source, context=context, written=written)
    return turn_id


def _locked_head(conn: sqlite3.Connection, name: str) -> tuple[str, str | None]:
    """The real label for a label or alias and its head, the session row locked (``session_head(lock=True)``):
    one statement for a label (an existing label was looked up, then its head, in two).

    A turn is new activity in its session, so an archived session it goes to is restored (``active``: back in
    ``nexus sessions list``, ``GET /v1/sessions``), whichever door the turn came through: ``nexus run -s``,
    ``nexus send``, an HTTP message, a broker's run. Left archived, the conversation went on hidden from every
    list (a stranger's trial); refused, a platform message to an agent whose chat was archived would be lost.
    """
    row = conn.execute("SELECT thread_id, status FROM sessions WHERE label = ?" + for_update(conn), (name,)).fetchone()
    if row is None:
        label = resolve_label(conn, name)  # an alias (or SessionNotFound)
        head = session_head(conn, label, lock=True)
        conn.execute(_RESTORE, (label,))
        return label, head
    if row[1] == "archived":
        conn.execute(_RESTORE, (name,))
    return name, None if row[0] is None else str(row[0])


_RESTORE = "UPDATE sessions SET status = 'active' WHERE label = ? AND status = 'archived'"
"""An archived session a turn goes to is active again (see ``_locked_head``); its ``updated_at`` moves with the turn."""


def _require_open(conn: sqlite3.Connection, turn_id: str) -> None:
    """The turn is open, and stays so (its row locked) until the journal entry is in."""
    row = conn.execute("SELECT status FROM turns WHERE id = ?" + for_update(conn), (turn_id,)).fetchone()
    if row is None:
        raise TurnNotFound(turn_id)
    if row[0] not in OPEN_STATUSES:
        raise TurnStateError(f"turn {turn_id!r} is already closed ({row[0]}); only an open turn takes journal entries")


def journal(conn: sqlite3.Connection, turn_id: str, kind: str, body: dict[str, Any]) -> None:
    """Append one entry (``message`` or ``tool_call``) to an open turn's crash journal."""
    _require_open(conn, turn_id)
    row = conn.execute("SELECT COALESCE(MAX(ordinal) + 1, 0) FROM turn_journal WHERE turn_id = ?", (turn_id,))
    conn.execute(
        "INSERT INTO turn_journal (turn_id, ordinal, kind, body, created_at) VALUES (?, ?, ?, ?, ?)",
        (turn_id, int(row.fetchone()[0]), kind, dumps(body), now_ms()),
    )


PARTIAL = "partial"
"""Journal kind of an assistant message's slot entry (see :func:`journal_partial`)."""

MID_REPLY_NOTE = "the process died mid-reply; this is the reply as far as it had streamed (kept by the crash journal)"
"""``error_message`` of an assistant message recovered from a partial (unfinished) journal entry."""


def journal_partial(conn: sqlite3.Connection, turn_id: str, slot: int, body: dict[str, Any]) -> None:
    """Write the entry of assistant message ``slot``: replaced in place if it exists (its ordinal kept).

    UPDATE, then INSERT on a miss: measured cheaper here than one ``INSERT ... ON CONFLICT``. On SQLite the
    UPDATE itself checks that the turn is open, and the turn is read on its own only on a miss (a new slot, or
    a closed turn: refused there): every snapshot of a streaming reply after its first is one statement, not
    two — the writer journals ~4 a second per streaming run, a sixth of its work per snapshot was that read.
    On PostgreSQL the turn's row is locked first, as before (it stays open until this transaction ends).
    """
    text, now = dumps(body), now_ms()
    postgres = is_postgres(conn)
    if postgres:
        _require_open(conn, turn_id)
    if conn.execute(_REPLACE_SLOT, (text, now, turn_id, slot, turn_id)).rowcount:
        return
    if not postgres:
        _require_open(conn, turn_id)
    row = conn.execute("SELECT COALESCE(MAX(ordinal) + 1, 0) FROM turn_journal WHERE turn_id = ?", (turn_id,))
    conn.execute(
        "INSERT INTO turn_journal (turn_id, ordinal, kind, body, created_at, slot) VALUES (?, ?, ?, ?, ?, ?)",
        (turn_id, int(row.fetchone()[0]), PARTIAL, text, now, slot),
    )


_REPLACE_SLOT = (
    "UPDATE turn_journal SET body = ?, created_at = ? WHERE turn_id = ? AND slot = ?"
    f" AND EXISTS (SELECT 1 FROM turns WHERE id = ? AND status IN ({', '.join(repr(s) for s in OPEN_STATUSES)}))"
)
"""Replace a slot's entry while its turn is open (see :func:`journal_partial`)."""


def partial_entry(message: AssistantMessage, complete: bool) -> dict[str, Any]:
    """The journal body of an assistant message's slot: the message so far, and whether it ended."""
    return {"message": message_to_dict(message), "complete": complete}


def tool_call_entry(
    call: ToolCall, result: ToolResultMessage, started_at: int, completed_at: int, spawned: str | None
) -> dict[str, Any]:
    """The journal body of one finished tool call."""
    return {
        "call": block_to_dict(call),
        "result": message_to_dict(result),
        "started_at": started_at,
        "completed_at": completed_at,
        "spawned": spawned,
    }


def _journal_entries(conn: sqlite3.Connection, turn_id: str) -> list[tuple[str, dict[str, Any]]]:
    rows = conn.execute("SELECT kind, body FROM turn_journal WHERE turn_id = ? ORDER BY ordinal", (turn_id,))
    return [(str(kind), json.loads(body)) for kind, body in rows]


def _taken_journal(conn: sqlite3.Connection, turn_id: str) -> list[tuple[str, dict[str, Any]]]:
    """:func:`_journal_entries`, deleted in the same statement (the turn's write replaces its journal)."""
    rows = conn.execute("DELETE FROM turn_journal WHERE turn_id = ? RETURNING ordinal, kind, body", (turn_id,))
    return [(str(kind), json.loads(body)) for _, kind, body in sorted(rows.fetchall())]


def _journal_calls(entries: list[tuple[str, dict[str, Any]]]) -> dict[str, ToolCallRecord]:
    calls: dict[str, ToolCallRecord] = {}
    for kind, body in entries:
        if kind != "tool_call":
            continue
        call = block_from_dict(body["call"])
        assert isinstance(call, ToolCall)
        result = message_from_dict(body["result"])
        is_error = isinstance(result, ToolResultMessage) and result.is_error
        calls[call.id] = ToolCallRecord(
            call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            status="failed" if is_error else "completed",
            started_at=int(body.get("started_at") or 0),
            completed_at=body.get("completed_at"),
            error=result.text if is_error and isinstance(result, ToolResultMessage) else None,
            spawned_session_label=body.get("spawned"),
        )
    return calls


@dataclass(slots=True)
class _Slot:
    """Where a turn being written sits in the tree."""

    turn_id: str
    parent_id: str | None
    seg: int
    seq: int
    qcount: int
    parent_total: int
    opened: bool
    journal_calls: dict[str, ToolCallRecord]


def _opened_slot(conn: sqlite3.Connection, turn_id: str, session_label: str, has_query: bool) -> _Slot:
    """The slot of a turn made by ``open_turn``, checked to be open and to belong to the session."""
    row = conn.execute(  # locked: a turn is closed once (its writer and recover() may race)
        "SELECT parent_turn_id, segment_id, seq, status, session_label, query_count,"
        " (SELECT p.thread_total_tokens FROM turns p WHERE p.id = turns.parent_turn_id) FROM turns WHERE id = ?"
        + for_update(conn),
        (turn_id,),
    ).fetchone()
    if row is None:
        raise TurnNotFound(turn_id)
    parent_id, seg, seq, status, opened_for, qcount, parent_total = row
    if status not in OPEN_STATUSES:
        raise TurnStateError(f"turn {turn_id!r} is already closed ({status}); a turn is written only once")
    if opened_for != session_label:
        raise TurnStateError(f"turn {turn_id!r} was opened for session {opened_for!r}, not {session_label!r}")
    if has_query:
        raise TurnStateError(f"turn {turn_id!r} already has its query messages (open_turn stored them)")
    total = 0 if parent_id is None else int(parent_total)  # the parent's, read with the row (one statement)
    calls = _journal_calls(_taken_journal(conn, turn_id))
    return _Slot(turn_id, parent_id, seg, seq, qcount, total, True, calls)


def write_turn(
    conn: sqlite3.Connection,
    session_label: str,
    turn_id: str | None,
    parent: Any,
    query_messages: Sequence[Message],
    fields: TurnDetails,
    outcome: TurnOutcome,
    *,
    if_head_moved: str = "raise",
    reason: str = "write",
    source: str | None = None,
    context: dict[str, object] | None = None,
    move: bool = True,
) -> str:
    """The nine steps of a turn write (reference §1.2) on an open turn or a new one."""
    now = now_ms()
    session_label, head = _locked_head(conn, session_label)
    if turn_id is not None:
        slot = _opened_slot(conn, turn_id, session_label, bool(query_messages))
    else:
        parent_id = head if parent is HEAD else parent
        slot = _Slot("", parent_id, 0, 0, len(query_messages), 0, False, {})
    if slot.parent_id != head and if_head_moved == "raise":
        raise HeadMovedError(session_label, slot.parent_id, head)
    if outcome.turn_type == "compaction" and outcome.compaction is None:
        raise LedgerError("a compaction turn needs its CompactionRecord (compaction=...)")
    if not slot.opened:
        slot.turn_id = new_ulid()
        slot.seg, slot.seq, slot.parent_total = place(conn, slot.parent_id, slot.turn_id)
    _store(conn, slot, session_label, query_messages, fields, outcome, now, source, context)
    if move and slot.parent_id == head:
        move_pointer(conn, session_label, slot.turn_id, reason, now)
    return slot.turn_id


def _store(
    conn: sqlite3.Connection,
    slot: _Slot,
    session_label: str,
    query_messages: Sequence[Message],
    fields: TurnDetails,
    outcome: TurnOutcome,
    now: int,
    source: str | None,
    context: dict[str, object] | None,
) -> None:
    """Steps 1-5: the turn row, its messages, tool calls and compaction (journal replaced)."""
    seg, seq, qcount, response = slot.seg, slot.seq, slot.qcount, outcome.response_messages
    cols = _final_columns(outcome, qcount, slot.parent_total, now)
    cols.update(detail_columns(fields))
    keyed = [(pack_key(seg, seq, qcount + i), m) for i, m in enumerate(response)]
    call_rows = _tool_call_rows(seg, seq, keyed, outcome.tool_calls, slot.journal_calls)
    cols["tool_call_count"] = len(call_rows)
    if slot.opened:
        update_turn_row(conn, slot.turn_id, cols)  # its journal went when its slot was read (_taken_journal)
    else:
        base: dict[str, object] = {
            "id": slot.turn_id,
            "parent_turn_id": slot.parent_id,
            "segment_id": seg,
            "seq": seq,
            "session_label": session_label,
            "started_at": now,
            "query_count": qcount,
        }
        base.update(cols)
        insert_turn_row(conn, base)
        if query_messages:
            insert_messages(conn, seg, seq, 0, query_messages, source=source, context=context, written=outcome.written)
    if response:
        insert_messages(
            conn,
            seg,
            seq,
            qcount,
            response,
            outcome.message_metadata,
            sources=outcome.response_sources,
            origin_ids=outcome.origin_ids,
            written=outcome.written,
        )
    if call_rows:
        insert_tool_calls(conn, call_rows)
    if outcome.compaction is not None:
        _check_compaction(conn, outcome.compaction, seg, seq)
        insert_compaction(conn, slot.turn_id, outcome.compaction)


def _check_compaction(conn: sqlite3.Connection, rec: CompactionRecord, seg: int, seq: int) -> None:
    """A compaction must name real turns, and the first kept turn must be an ancestor of it."""
    turn_position(conn, rec.summarized_through_turn_id)
    if rec.first_kept_turn_id is None:
        return
    kseg, kseq, _ = turn_position(conn, rec.first_kept_turn_id)
    if not on_path(path_ranges(conn, seg, seq), kseg, kseq):
        raise LedgerError(
            f"first_kept_turn_id {rec.first_kept_turn_id!r} is not an ancestor of the compaction turn; "
            "it must be a turn on the compacted session's history"
        )


def recovered_messages(entries: list[tuple[str, dict[str, Any]]], model: str, provider: str) -> list[Message]:
    """The response messages of a turn rebuilt from its journal, in journal order.

    An assistant message's slot entry (``journal_partial``) sits where it was first written;
    an unfinished one becomes an ``aborted`` message with :data:`MID_REPLY_NOTE`. Tool calls
    journaled without their assistant message get one synthetic assistant message holding
    them (``stop_reason="tool_use"``), placed before their results, so every call and its
    result stay one unit.
    """
    out: list[Message] = []
    seen: set[str] = set()
    calls: list[AssistantContent] = []
    results: list[Message] = []

    def flush() -> None:
        if calls:
            out.append(AssistantMessage(content=list(calls), model=model, provider=provider, stop_reason="tool_use"))
            out.extend(results)
            calls.clear()
            results.clear()

    for kind, body in entries:
        if kind in ("message", PARTIAL):
            flush()
            msg = message_from_dict(body) if kind == "message" else _partial_message(body)
            if msg is None:
                continue
            if isinstance(msg, AssistantMessage):
                seen.update(c.id for c in msg.tool_calls)
            out.append(msg)
            continue
        call = block_from_dict(body["call"])
        result = message_from_dict(body["result"])
        if isinstance(call, ToolCall) and call.id not in seen:
            calls.append(call)
            results.append(result)
        else:
            flush()
            out.append(result)
    flush()
    return out


def _partial_message(body: dict[str, Any]) -> AssistantMessage | None:
    """The message of a slot entry; an unfinished one is closed as ``aborted`` (``None`` if it has nothing)."""
    msg = message_from_dict(body["message"])
    if not isinstance(msg, AssistantMessage):
        return None
    if body.get("complete"):
        return msg
    if not any(isinstance(b, ToolCall) or _has_text(b) for b in msg.content):
        return None
    return replace(msg, stop_reason="aborted", error_message=MID_REPLY_NOTE, error_kind=None)


def _has_text(block: object) -> bool:
    """A text or thinking block that says something (an opened, still empty block does not)."""
    if isinstance(block, ThinkingContent):
        return bool(block.thinking) or block.redacted
    return bool(getattr(block, "text", ""))


def recover_turn(conn: sqlite3.Connection, turn_id: str, note: str) -> tuple[str, bool]:
    """Close one open turn as ``aborted`` with what it journaled; returns (session, pointer moved)."""
    found = lock_open_turn(conn, turn_id, "session_label, parent_turn_id, model, provider")
    if found is None:
        return "", False
    (label, parent_id, model, provider), head = found
    entries = _journal_entries(conn, turn_id)
    outcome = TurnOutcome(
        status="aborted",
        response_messages=recovered_messages(entries, model or "", provider or ""),
        stop_reason="aborted",
        error={"kind": "unknown", "message": note, "retryable": True},
    )
    write_turn(conn, label, turn_id, HEAD, (), TurnDetails(), outcome, if_head_moved="branch", reason="recover")
    return str(label), head == parent_id


def lock_open_turn(conn: sqlite3.Connection, turn_id: str, columns: str) -> tuple[tuple[Any, ...], str | None] | None:
    """``columns`` of an open turn and its session's head, or ``None`` if the turn is unknown or closed.

    The session's row is locked first, then the turn's (PostgreSQL), the order every turn write takes
    them in, so closing a turn (``recover``) and its owner's write cannot deadlock, and the status read
    stays true to the commit.
    """
    row = conn.execute("SELECT session_label FROM turns WHERE id = ?", (turn_id,)).fetchone()
    if row is None:
        return None
    head = session_head(conn, str(row[0]), lock=True)
    row = conn.execute(f"SELECT {columns}, status FROM turns WHERE id = ?" + for_update(conn), (turn_id,)).fetchone()
    return None if row is None or row[-1] not in OPEN_STATUSES else (tuple(row[:-1]), head)
