"""The write path: placing turns in the tree, opening/journaling/finishing turns, pointer moves.

Every public entry point here runs inside one transaction handed in by the caller
(``Database.write``), so a turn is written whole or not at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import field

from nexus._dataclass import dataclass
from nexus.ledger._decode import Origins, OriginWrite, encode_body, origin_id
from nexus.ledger._rows import dumps, dumps_opt, is_postgres
from nexus.ledger._schema import MAX_ORDINAL, MAX_SEGMENT, MAX_SEQ, pack_key
from nexus.ledger.errors import LedgerError, SessionNotFound, TurnNotFound, TurnStateError
from nexus.ledger.records import OPEN_STATUSES, CompactionRecord, ToolCallRecord, TurnDetails
from nexus.llm import AssistantMessage, Message, ToolResultMessage, Usage


def detail_columns(details: TurnDetails) -> dict[str, object]:
    """The non-``None`` fields of ``details`` as turn columns."""
    raw: dict[str, object | None] = {
        "model": details.model,
        "provider": details.provider,
        "role": details.role,
        "run_id": details.run_id,
        "toolset_name": details.toolset_name,
        "tools_available": dumps_opt(details.tools_available),
        "permissions_granted": dumps_opt(details.permissions_granted),
        "permissions_used": dumps_opt(details.permissions_used),
        "source_event_id": details.source_event_id,
        "workspace_path": details.workspace_path,
        "persona_id": details.persona_id,
        "system_prompt_hash": details.system_prompt_hash,
        "metadata_json": dumps_opt(details.metadata),
        "started_at": details.started_at,
    }
    return {k: v for k, v in raw.items() if v is not None}


@dataclass(slots=True)
class TurnOutcome:
    """How a turn ended: its response, usage, status and optional compaction."""

    status: str = "completed"
    response_messages: Sequence[Message] = ()
    usage: Usage | None = None
    stop_reason: str | None = None
    error: dict[str, object] | str | None = None
    compaction: CompactionRecord | None = None
    tool_calls: Sequence[ToolCallRecord] | None = None
    turn_type: str | None = None
    completed_at: int | None = None
    message_metadata: Sequence[dict[str, object] | None] = field(default_factory=tuple)
    response_sources: Sequence[str | None] = field(default_factory=tuple)
    """``source`` of each response message (its index); only user messages (steers) carry one."""
    origin_ids: OriginWrite | None = None
    """The writing store's remembered ``origins`` ids (None: look each one up)."""
    written: WrittenRows | None = None
    """Collects the message rows the write inserts (None: not kept)."""


MessageRow = tuple[int, str, str, str | None, str | None, str | None]
"""A ``messages`` row as inserted and read: ``(key, role, body, source, context_json, metadata_json)``."""


class WrittenRows:
    """The message rows one write inserted, and the ``origins`` ids their bodies name: the turn store
    answers the read-back of a turn it has just written from these (the same rows decode the same way)
    instead of reading them again. Reset per attempt of the transaction, like :class:`OriginWrite`."""

    __slots__ = ("origins", "rows")

    def __init__(self) -> None:
        self.rows: list[MessageRow] = []
        self.origins: Origins = {}

    def attempt(self) -> WrittenRows:
        """Start a transaction attempt: what an earlier (rolled back) attempt inserted is forgotten."""
        self.rows.clear()
        self.origins.clear()
        return self


# --------------------------------------------------------------------------- placement


def place(conn: sqlite3.Connection, parent_id: str | None, turn_id: str) -> tuple[int, int, int]:
    """Choose ``(segment_id, seq)`` for a new child of ``parent_id`` (``None`` = a new root).

    Returns ``(segment_id, seq, parent's thread_total_tokens)`` and marks the parent
    ``has_children`` (spec step 6; an open child counts, it is never deleted). The child
    continues the parent's segment when the parent had no child yet - then the slot
    ``(segment, seq + 1)`` is free, since only a child of the parent can occupy it -
    otherwise it opens a new segment that records the fork point.
    """
    if parent_id is None:
        return _new_segment(conn, None, None, turn_id), 0, 0
    row = conn.execute(  # locked: two children of one parent (forks of two sessions) must not both continue it
        "SELECT segment_id, seq, status, has_children, thread_total_tokens FROM turns WHERE id = ?" + for_update(conn),
        (parent_id,),
    ).fetchone()
    if row is None:
        raise TurnNotFound(parent_id)
    seg, seq, status, has_children, total = int(row[0]), int(row[1]), str(row[2]), row[3], int(row[4])
    if status in OPEN_STATUSES:
        raise TurnStateError(f"turn {parent_id!r} is still open ({status}); a turn can only follow a finished turn")
    if seq + 1 > MAX_SEQ:
        raise LedgerError(f"turn {parent_id!r} is at depth {seq}, the deepest a ledger supports; compact or fork")
    if not has_children:
        conn.execute("UPDATE turns SET has_children = 1 WHERE id = ?", (parent_id,))
        return seg, seq + 1, total
    root = conn.execute("SELECT root_turn_id FROM segments WHERE id = ?", (seg,)).fetchone()[0]
    return _new_segment(conn, seg, seq, str(root)), seq + 1, total


def _new_segment(conn: sqlite3.Connection, parent_seg: int | None, parent_seq: int | None, root: str) -> int:
    seg = int(
        conn.execute(
            "INSERT INTO segments (parent_segment_id, parent_seq, root_turn_id) VALUES (?, ?, ?) RETURNING id",
            (parent_seg, parent_seq, root),
        ).fetchone()[0]
    )
    if seg > MAX_SEGMENT:
        raise LedgerError("this ledger has run out of segment ids (2^27 branches); start a new database file")
    return seg


def for_update(conn: object, mode: str = "UPDATE") -> str:
    """`` FOR UPDATE`` (or ``FOR SHARE``…) on PostgreSQL, nothing on SQLite: the row lock of a write run at
    ``READ COMMITTED`` (``row_locks=True``) on the rows its outcome depends on. SQLite needs none: its
    writes run one at a time (``BEGIN IMMEDIATE``)."""
    return f" FOR {mode}" if is_postgres(conn) else ""


def session_head(conn: sqlite3.Connection, label: str, *, lock: bool = False) -> str | None:
    """Current head turn id of a session (exact label); raises :class:`SessionNotFound`.

    ``lock``: the session's row stays locked to the end of the transaction (PostgreSQL), so a turn
    write decides "parent = head" and moves the head with no other write of this session between.
    """
    sql = "SELECT thread_id FROM sessions WHERE label = ?" + (for_update(conn) if lock else "")
    row = conn.execute(sql, (label,)).fetchone()
    if row is None:
        raise SessionNotFound(label)
    return None if row[0] is None else str(row[0])


def move_pointer(conn: sqlite3.Connection, label: str, turn_id: str | None, reason: str, now: int) -> None:
    """Point a session at ``turn_id`` and log the move (spec steps 8 and 9)."""
    conn.execute("UPDATE sessions SET thread_id = ?, updated_at = ? WHERE label = ?", (turn_id, now, label))
    conn.execute(
        "INSERT INTO session_history (session_label, thread_id, changed_at, reason) VALUES (?, ?, ?, ?)",
        (label, turn_id, now, reason),
    )


# --------------------------------------------------------------------------- messages / tool calls


def insert_messages(
    conn: sqlite3.Connection,
    seg: int,
    seq: int,
    start: int,
    messages: Sequence[Message],
    metadata: Sequence[dict[str, object] | None] = (),
    source: str | None = None,
    context: dict[str, object] | None = None,
    sources: Sequence[str | None] = (),
    origin_ids: OriginWrite | None = None,
    written: WrittenRows | None = None,
) -> list[int]:
    """Store ``messages`` as ordinals ``start..`` of the turn at ``(seg, seq)``; returns their ids.

    A user message gets ``sources[i]`` when given (a steer injected into the turn), else ``source``.
    ``written`` collects the rows inserted.
    """
    if start + len(messages) - 1 > MAX_ORDINAL:
        raise LedgerError(f"a turn holds at most {MAX_ORDINAL + 1} messages; split the run into several turns")
    keys = [pack_key(seg, seq, start + i) for i in range(len(messages))]
    ctx = dumps_opt(context)
    origins: dict[tuple[str, str, str], int] = {}
    for msg in messages:
        if isinstance(msg, AssistantMessage):
            triple = (msg.api, msg.provider, msg.model)
            if triple not in origins:
                origins[triple] = origin_ids.get(conn, triple) if origin_ids else origin_id(conn, *triple)
    rows = [
        (
            key,
            msg.role,
            encode_body(msg, origins[(msg.api, msg.provider, msg.model)] if isinstance(msg, AssistantMessage) else 0),
            ((sources[i] if i < len(sources) else None) or source) if msg.role == "user" else None,
            ctx if msg.role == "user" else None,
            dumps_opt(metadata[i]) if i < len(metadata) else None,
        )
        for i, (key, msg) in enumerate(zip(keys, messages, strict=True))
    ]
    conn.executemany(
        "INSERT INTO messages (key, role, body, source, context_json, metadata_json) VALUES (?, ?, ?, ?, ?, ?)", rows
    )
    if written is not None:
        written.rows.extend(rows)
        written.origins.update({number: triple for triple, number in origins.items()})
    return keys


def _tool_call_rows(
    seg: int,
    seq: int,
    keyed: Sequence[tuple[int, Message]],
    given: Sequence[ToolCallRecord] | None,
    journal: dict[str, ToolCallRecord],
) -> list[tuple[object, ...]]:
    """One ``tool_calls`` row per tool call in the response, merged with caller/journal records."""
    results = {m.tool_call_id: (k, m) for k, m in keyed if isinstance(m, ToolResultMessage)}
    extra = {r.call_id: r for r in given or ()}
    rows: list[tuple[object, ...]] = []

    def add(rec: ToolCallRecord | None, call_id: str, name: str, msg_key: int | None, asked_at: int) -> None:
        found = results.get(call_id)
        res_key, res = (found[0], found[1]) if found else (None, None)
        if rec is not None:
            status, error, spawned = rec.status, rec.error, rec.spawned_session_label
            started, completed = rec.started_at or asked_at, rec.completed_at
        else:
            status = "completed" if res is not None and not res.is_error else "failed"
            error = res.text if res is not None and res.is_error else None
            if res is None:
                error = "no result: the turn ended before the tool finished"
            spawned, started, completed = None, asked_at, res.timestamp if res else None
        key = pack_key(seg, seq, len(rows))
        rows.append((key, call_id, name, msg_key, res_key, status, error, spawned, started, completed))

    for key, msg in keyed:
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                rec = extra.pop(call.id, None) or journal.get(call.id)
                add(rec, call.id, call.name, key, msg.timestamp)
    for rec in extra.values():  # records the caller gave for calls no message carries
        add(rec, rec.call_id, rec.tool_name, None, rec.started_at)
    if len(rows) > MAX_ORDINAL + 1:
        raise LedgerError(f"a turn holds at most {MAX_ORDINAL + 1} tool calls")
    return rows


def insert_tool_calls(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    """Store tool-call rows built by :func:`_tool_call_rows`."""
    conn.executemany(
        "INSERT INTO tool_calls (key, call_id, tool_name, message_key, result_key, status, error, "
        "spawned_session_label, started_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def insert_compaction(conn: sqlite3.Connection, turn_id: str, rec: CompactionRecord) -> None:
    """Store the compaction details row of a compaction turn (spec step 5)."""
    conn.execute(
        "INSERT INTO compactions (turn_id, summary, summarized_through_turn_id, first_kept_turn_id, turns_summarized,"
        " compaction_type, model, provider, tokens_before, tokens_after, summary_tokens, summarization_input_tokens,"
        " summarization_output_tokens, duration_ms, trigger, metadata_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            turn_id,
            rec.summary,
            rec.summarized_through_turn_id,
            rec.first_kept_turn_id,
            rec.turns_summarized,
            rec.compaction_type,
            rec.model,
            rec.provider,
            rec.tokens_before,
            rec.tokens_after,
            rec.summary_tokens,
            rec.summarization_input_tokens,
            rec.summarization_output_tokens,
            rec.duration_ms,
            rec.trigger,
            dumps_opt(rec.metadata),
        ),
    )


# --------------------------------------------------------------------------- turn rows


def _usage_columns(outcome: TurnOutcome) -> dict[str, object]:
    usage = outcome.usage
    if usage is None:
        usage = Usage()
        for msg in outcome.response_messages:
            if isinstance(msg, AssistantMessage):
                u = msg.usage
                usage.input += u.input
                usage.output += u.output
                usage.cache_read += u.cache_read
                usage.cache_write += u.cache_write
                usage.reasoning += u.reasoning
                usage.total += u.total
                usage.cost.total += u.cost.total
    total = usage.total or (usage.input + usage.output + usage.cache_read + usage.cache_write)
    return {
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cached_input_tokens": usage.cache_read,
        "cache_write_tokens": usage.cache_write,
        "reasoning_tokens": usage.reasoning,
        "total_tokens": total,
        "cost": usage.cost.total or None,
    }


def _error_json(error: dict[str, object] | str | None) -> str | None:
    if error is None:
        return None
    return dumps({"kind": "unknown", "message": error} if isinstance(error, str) else error)


def _final_columns(outcome: TurnOutcome, first_response: int, parent_total: int, now: int) -> dict[str, object]:
    """Columns every finished turn sets (status, usage, counts, thread totals)."""
    cols = _usage_columns(outcome)
    response = outcome.response_messages
    last_assistant = None
    for i in range(len(response) - 1, -1, -1):
        if isinstance(response[i], AssistantMessage):
            last_assistant = i
            break
    stop = outcome.stop_reason
    if stop is None and last_assistant is not None:
        stop = response[last_assistant].stop_reason  # type: ignore[union-attr]
    # A turn that carries a compaction record is a compaction turn, whatever the caller called it:
    # history() finds the latest compaction by turn_type.
    turn_type = "compaction" if outcome.compaction is not None else (outcome.turn_type or "normal")
    cols.update(
        status=outcome.status,
        turn_type=turn_type,
        completed_at=outcome.completed_at or now,
        thread_total_tokens=parent_total + int(cols["total_tokens"]),  # type: ignore[call-overload]
        message_count=first_response + len(response),
        response_ordinal=None if last_assistant is None else first_response + last_assistant,
        stop_reason=stop,
        error_json=_error_json(outcome.error),
        owner=None,
    )
    return cols


def insert_turn_row(conn: sqlite3.Connection, cols: dict[str, object]) -> None:
    """INSERT a turn row from a column dict."""
    names = ", ".join(cols)
    marks = ", ".join("?" * len(cols))
    conn.execute(f"INSERT INTO turns ({names}) VALUES ({marks})", tuple(cols.values()))


def update_turn_row(conn: sqlite3.Connection, turn_id: str, cols: dict[str, object]) -> None:
    """UPDATE a turn row from a column dict."""
    sets = ", ".join(f"{name} = ?" for name in cols)
    conn.execute(f"UPDATE turns SET {sets} WHERE id = ?", (*cols.values(), turn_id))
