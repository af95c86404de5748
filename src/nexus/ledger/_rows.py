"""Row <-> record conversion and small JSON helpers shared by the read and write paths."""

from __future__ import annotations

import json
import json.encoder as _json_c
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from nexus.ledger._schema import MAX_ORDINAL, pack_key
from nexus.ledger.errors import SessionNotFound, TurnNotFound
from nexus.ledger.records import CompactionRecord, Session, Turn

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_MAKE_C_ENCODER: Any = getattr(_json_c, "c_make_encoder", None)  # CPython's C encoder (untyped; absent elsewhere)
_C_ENCODE = (
    None
    if _MAKE_C_ENCODER is None
    else _MAKE_C_ENCODER(None, _ENCODER.default, _json_c.encode_basestring, None, ":", ",", False, False, True)
)


def dumps(value: object) -> str:
    """Compact JSON (the text every row stores), as ``_ENCODER.encode`` writes it.

    The C encoder is made once, not at every call as ``encode`` does (~2 of its ~5 us for a queued message, and
    one runs for every message); it keeps no circular-reference marks, so a value it refuses is encoded again the
    usual way, which raises the usual error.
    """
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    try:
        return "".join(_C_ENCODE(value, 0))
    except Exception:  # a circular or unserializable value: the usual error, from the usual encoder
        return _ENCODER.encode(value)


def is_postgres(conn: Any) -> bool:
    """Whether ``conn`` is a PostgreSQL connection of the ledger (else SQLite).

    A plain ``sqlite3.Connection`` is answered by its type: ``getattr(conn, "dialect", ...)`` on it was a
    failing attribute lookup (instance, then the type's whole MRO), about five times a turn of a broker."""
    return type(conn) is not sqlite3.Connection and getattr(conn, "dialect", "sqlite") == "postgresql"


T = TypeVar("T")

IDS_PER_STATEMENT = 500
"""Values bound in one ``IN (...)`` list: well under SQLite's variable limit, and cheap to prepare."""


def in_lists(values: Sequence[T]) -> Iterator[tuple[list[T], str]]:
    """``values`` in slices of at most :data:`IDS_PER_STATEMENT`, each with its ``?, ?, …`` placeholders."""
    for start in range(0, len(values), IDS_PER_STATEMENT):
        chunk = list(values[start : start + IDS_PER_STATEMENT])
        yield chunk, ", ".join("?" * len(chunk))


def dumps_opt(value: object | None) -> str | None:
    """Compact JSON, or NULL for ``None``."""
    return None if value is None else dumps(value)


def loads_opt(text: str | None) -> Any:
    """Parse optional JSON text."""
    return None if text is None else json.loads(text)


TURN_COLUMNS = (
    "id, parent_turn_id, segment_id, seq, session_label, turn_type, status, started_at, completed_at, model, "
    "provider, role, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, "
    "total_tokens, thread_total_tokens, cost, query_count, message_count, response_ordinal, has_children, "
    "tool_call_count, stop_reason, error_json, run_id, source_event_id, workspace_path, toolset_name, "
    "tools_available, permissions_granted, permissions_used, persona_id, system_prompt_hash, metadata_json"
)


def turn_from_row(row: tuple[Any, ...], owner: str | None = None) -> Turn:
    """Build a :class:`Turn` from a ``SELECT {TURN_COLUMNS}`` row (``owner``: of an open turn, if read)."""
    (tid, parent, seg, seq, label, ttype, status, started, completed, model, provider, role, inp, out, cached,
     cwrite, reasoning, total, thread_total, cost, qcount, mcount, resp, has_children, tcount, stop, error,
     run_id, event, workspace, toolset, tools, granted, used, persona, prompt_hash, meta) = row  # fmt: skip
    return Turn(
        id=tid,
        parent_turn_id=parent,
        session_label=label,
        turn_type=ttype,
        status=status,
        started_at=started,
        completed_at=completed,
        depth=seq,
        model=model,
        provider=provider,
        role=role,
        input_tokens=inp,
        output_tokens=out,
        cached_input_tokens=cached,
        cache_write_tokens=cwrite,
        reasoning_tokens=reasoning,
        total_tokens=total,
        thread_total_tokens=thread_total,
        cost=cost or 0.0,
        query_message_ids=tuple(pack_key(seg, seq, i) for i in range(qcount)),
        response_message_id=None if resp is None else pack_key(seg, seq, resp),
        message_count=mcount,
        has_children=bool(has_children),
        tool_call_count=tcount,
        stop_reason=stop,
        error=loads_opt(error),
        run_id=run_id,
        source_event_id=event,
        workspace_path=workspace,
        toolset_name=toolset,
        tools_available=loads_opt(tools),
        permissions_granted=loads_opt(granted),
        permissions_used=loads_opt(used),
        persona_id=persona,
        system_prompt_hash=prompt_hash,
        metadata=loads_opt(meta),
        owner=owner,
    )


def fetch_turn(conn: sqlite3.Connection, turn_id: str) -> Turn:
    """The turn with ``turn_id``; raises :class:`TurnNotFound`."""
    row = conn.execute(f"SELECT {TURN_COLUMNS} FROM turns WHERE id = ?", (turn_id,)).fetchone()
    if row is None:
        raise TurnNotFound(turn_id)
    return turn_from_row(row)


def turn_position(conn: sqlite3.Connection, turn_id: str) -> tuple[int, int, str]:
    """``(segment_id, seq, status)`` of a turn; raises :class:`TurnNotFound`."""
    row = conn.execute("SELECT segment_id, seq, status FROM turns WHERE id = ?", (turn_id,)).fetchone()
    if row is None:
        raise TurnNotFound(turn_id)
    return int(row[0]), int(row[1]), str(row[2])


def key_range(segment_id: int, lo_seq: int, hi_seq: int) -> tuple[int, int]:
    """Inclusive key bounds of every message/tool call of turns ``lo_seq..hi_seq`` in a segment."""
    return pack_key(segment_id, lo_seq, 0), pack_key(segment_id, hi_seq, MAX_ORDINAL)


SESSION_COLUMNS = (
    "label, thread_id, persona_id, origin, status, created_at, updated_at, is_subagent, parent_session_label, "
    "parent_turn_id, spawn_tool_call_id, task_description, task_status, routing_key, origin_session_id, metadata_json"
)


def session_from_row(row: tuple[Any, ...]) -> Session:
    """Build a :class:`Session` from a ``SELECT {SESSION_COLUMNS}`` row."""
    return Session(
        label=row[0],
        thread_id=row[1],
        persona_id=row[2],
        origin=row[3],
        status=row[4],
        created_at=row[5],
        updated_at=row[6],
        is_subagent=bool(row[7]),
        parent_session_label=row[8],
        parent_turn_id=row[9],
        spawn_tool_call_id=row[10],
        task_description=row[11],
        task_status=row[12],
        routing_key=row[13],
        origin_session_id=row[14],
        metadata=loads_opt(row[15]),
    )


def fetch_session(conn: sqlite3.Connection, label: str) -> Session:
    """The session with exactly this label; raises :class:`SessionNotFound`."""
    row = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE label = ?", (label,)).fetchone()
    if row is None:
        raise SessionNotFound(label)
    return session_from_row(row)


COMPACTION_COLUMNS = (
    "turn_id, summary, summarized_through_turn_id, first_kept_turn_id, turns_summarized, compaction_type, model, "
    "provider, tokens_before, tokens_after, summary_tokens, summarization_input_tokens, "
    "summarization_output_tokens, duration_ms, trigger, metadata_json"
)


def compaction_from_row(row: tuple[Any, ...]) -> CompactionRecord:
    """Build a :class:`CompactionRecord` from a ``SELECT {COMPACTION_COLUMNS}`` row."""
    return CompactionRecord(
        turn_id=row[0],
        summary=row[1],
        summarized_through_turn_id=row[2],
        first_kept_turn_id=row[3],
        turns_summarized=row[4],
        compaction_type=row[5],
        model=row[6],
        provider=row[7],
        tokens_before=row[8],
        tokens_after=row[9],
        summary_tokens=row[10],
        summarization_input_tokens=row[11],
        summarization_output_tokens=row[12],
        duration_ms=row[13],
        trigger=row[14],
        metadata=loads_opt(row[15]),
    )
