"""The read path: history (with the compaction rule), ancestry, lookups for UIs."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from nexus.ledger._decode import Origins, decode_bodies, decode_body, load_origins
from nexus.ledger._paths import Range, on_path, path_ranges
from nexus.ledger._rows import (
    COMPACTION_COLUMNS,
    TURN_COLUMNS,
    compaction_from_row,
    fetch_turn,
    key_range,
    loads_opt,
    turn_from_row,
    turn_position,
)
from nexus.ledger._schema import unpack_key
from nexus.ledger.errors import TurnNotFound
from nexus.ledger.records import SUMMARY_PREFIX, CompactionRecord, StoredMessage, ToolCallRecord, Turn
from nexus.llm import Message, ToolResultMessage, UserMessage


def _latest_compaction(conn: sqlite3.Connection, ranges: list[Range]) -> tuple[str, int] | None:
    for seg, lo, hi in reversed(ranges):
        row = conn.execute(
            "SELECT id, seq FROM turns WHERE turn_type = 'compaction' AND segment_id = ? AND seq BETWEEN ? AND ? "
            "ORDER BY seq DESC LIMIT 1",
            (seg, lo, hi),
        ).fetchone()
        if row is not None:
            return str(row[0]), int(row[1])
    return None


def history_plan(conn: sqlite3.Connection, head_id: str) -> tuple[str | None, list[tuple[int, int]]]:
    """``(compaction summary or None, message key ranges)`` of the history ending at ``head_id``.

    With a compaction on the path the ranges start at its ``first_kept_turn_id`` (or at the
    compaction turn itself when nothing was kept).
    """
    seg, seq, _ = turn_position(conn, head_id)
    ranges = path_ranges(conn, seg, seq)
    summary: str | None = None
    lower = 0
    found = _latest_compaction(conn, ranges)
    if found is not None:
        comp_id, lower = found
        summary, first_kept = conn.execute(
            "SELECT summary, first_kept_turn_id FROM compactions WHERE turn_id = ?", (comp_id,)
        ).fetchone()
        if first_kept is not None:
            kseg, kseq, _ = turn_position(conn, first_kept)
            if on_path(ranges, kseg, kseq):
                lower = kseq
    keys = [key_range(rseg, max(lo, lower), hi) for rseg, lo, hi in ranges if max(lo, lower) <= hi]
    return summary, keys


def history_bodies(conn: sqlite3.Connection, head_id: str) -> tuple[str | None, list[str]]:
    """``(compaction summary or None, message JSON bodies)`` of the history ending at ``head_id``."""
    summary, ranges = history_plan(conn, head_id)
    bodies: list[str] = []
    for lo, hi in ranges:
        bodies.extend(
            row[0] for row in conn.execute("SELECT body FROM messages WHERE key BETWEEN ? AND ? ORDER BY key", (lo, hi))
        )
    return summary, bodies


def _with_summary(summary: str | None, messages: list[Message]) -> list[Message]:
    if summary is not None:
        messages.insert(0, UserMessage(SUMMARY_PREFIX + summary, timestamp=0))
    return messages


def history(conn: sqlite3.Connection, head_id: str | None) -> list[Message]:
    """The messages to send to the model for a session whose head is ``head_id``."""
    if head_id is None:
        return []
    summary, bodies = history_bodies(conn, head_id)
    return _with_summary(summary, decode_bodies(bodies, load_origins(conn)))


def history_cached(conn: sqlite3.Connection, head_id: str | None, cache: MessageCache) -> list[Message]:
    """Like :func:`history`, decoding only the messages ``cache`` does not hold yet (rows never change).

    The result is a new list; the message objects in it are shared with other calls.
    """
    if head_id is None:
        return []
    summary, ranges = history_plan(conn, head_id)
    origins: Origins | None = None
    result: list[Message] = []
    for lo, hi in ranges:
        part = cache.get(conn, lo, hi)
        if part is None:
            if origins is None:
                origins = load_origins(conn)
            part = cache.fill(conn, lo, hi, origins)
        result.extend(part)
    cache.trim()
    return _with_summary(summary, result)


class MessageCache:
    """Decoded messages of history key ranges, by range start; bounded by a message count.

    Entries stay valid forever: a range of a history path holds only finished turns, whose
    messages never change, so a range seen before only grows at its end (the new turns).
    A hit costs one list slice; a grown range decodes only its new rows.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.ranges: dict[int, tuple[int, list[Message]]] = {}

    def get(self, conn: sqlite3.Connection, lo: int, hi: int) -> list[Message] | None:
        """The messages of ``[lo, hi]`` if the cached entry covers it, else ``None``."""
        known = self.ranges.get(lo)
        if known is None or known[0] < hi:
            return None
        self.ranges[lo] = self.ranges.pop(lo)  # most recently used last
        if known[0] == hi:
            return known[1]
        # a shorter path through a range seen before (a fork point, a pointer moved back): count, don't decode
        count = conn.execute("SELECT count(*) FROM messages WHERE key BETWEEN ? AND ?", (lo, hi)).fetchone()[0]
        return known[1][:count]

    def fill(self, conn: sqlite3.Connection, lo: int, hi: int, origins: Origins) -> list[Message]:
        """Read and decode what the entry for ``lo`` lacks up to ``hi``; returns the messages of ``[lo, hi]``."""
        known = self.ranges.pop(lo, None)
        messages: list[Message] = [] if known is None else known[1]
        start = lo if known is None else known[0] + 1
        rows = conn.execute("SELECT body FROM messages WHERE key BETWEEN ? AND ? ORDER BY key", (start, hi))
        new = decode_bodies([r[0] for r in rows], origins)
        messages.extend(new)
        self.size += len(new)
        self.ranges[lo] = (hi, messages)  # re-inserted last: the most recently used entry
        return messages

    def trim(self) -> None:
        """When over the limit, forget the least recently used entries down to half of it."""
        if self.size <= self.limit:
            return
        while self.size > self.limit // 2 and self.ranges:
            self.size -= len(self.ranges.pop(next(iter(self.ranges)))[1])


def ancestry(conn: sqlite3.Connection, turn_id: str) -> list[str]:
    """Turn ids from the root to ``turn_id`` (inclusive)."""
    seg, seq, _ = turn_position(conn, turn_id)
    out: list[str] = []
    for rseg, lo, hi in path_ranges(conn, seg, seq):
        out.extend(
            str(r[0])
            for r in conn.execute(
                "SELECT id FROM turns WHERE segment_id = ? AND seq BETWEEN ? AND ? ORDER BY seq", (rseg, lo, hi)
            )
        )
    return out


def path_turns(conn: sqlite3.Connection, turn_id: str, limit: int | None = None) -> list[Turn]:
    """Full :class:`Turn` records from the root to ``turn_id``; with ``limit``, only the newest ``limit`` of them."""
    seg, seq, _ = turn_position(conn, turn_id)
    left = limit
    out: list[Turn] = []
    sql = f"SELECT {TURN_COLUMNS} FROM turns WHERE segment_id = ? AND seq BETWEEN ? AND ? ORDER BY seq DESC"
    for rseg, lo, hi in reversed(path_ranges(conn, seg, seq)):
        if left == 0:
            break
        if left is None:
            rows = conn.execute(sql, (rseg, lo, hi)).fetchall()
        else:
            rows = conn.execute(sql + " LIMIT ?", (rseg, lo, hi, left)).fetchall()
            left -= len(rows)
        out.extend(turn_from_row(r) for r in rows)
    return out[::-1]


def children(conn: sqlite3.Connection, turn_id: str) -> list[Turn]:
    """The direct children of a turn (the next turn of its segment and the first turns of forks)."""
    seg, seq, _ = turn_position(conn, turn_id)
    rows = conn.execute(
        f"SELECT {TURN_COLUMNS} FROM turns WHERE seq = ? AND (segment_id = ? OR segment_id IN "
        "(SELECT id FROM segments WHERE parent_segment_id = ? AND parent_seq = ?)) ORDER BY id",
        (seq + 1, seg, seg, seq),
    )
    return [turn_from_row(r) for r in rows if r[1] == turn_id]


def turn_messages(conn: sqlite3.Connection, turn_id: str) -> list[StoredMessage]:
    """Every stored message of one turn, in order."""
    seg, seq, _ = turn_position(conn, turn_id)
    rows = conn.execute(
        "SELECT key, role, body, source, context_json, metadata_json FROM messages WHERE key BETWEEN ? AND ?"
        " ORDER BY key",
        key_range(seg, seq, seq),
    )
    origins = load_origins(conn)
    return [stored_message(turn_id, r, origins) for r in rows]


def stored_message(turn_id: str, row: Sequence[object], origins: Origins) -> StoredMessage:
    """A ``messages`` row (``key, role, body, source, context_json, metadata_json``) as a :class:`StoredMessage`."""
    key = int(row[0])  # type: ignore[call-overload]
    return StoredMessage(
        id=key,
        turn_id=turn_id,
        ordinal=unpack_key(key)[2],
        role=str(row[1]),
        message=decode_body(str(row[2]), origins),
        source=row[3],  # type: ignore[arg-type]
        context=loads_opt(row[4]),  # type: ignore[arg-type]
        metadata=loads_opt(row[5]),  # type: ignore[arg-type]
    )


def turn_at(conn: sqlite3.Connection, segment_id: int, seq: int) -> str:
    """The id of the turn at a position (message and tool-call ids encode one)."""
    row = conn.execute("SELECT id FROM turns WHERE segment_id = ? AND seq = ?", (segment_id, seq)).fetchone()
    if row is None:
        raise TurnNotFound(f"{segment_id}:{seq}", "turn position")
    return str(row[0])


def get_message(conn: sqlite3.Connection, message_id: int) -> StoredMessage:
    """One stored message by its id; raises :class:`TurnNotFound` (what="message")."""
    row = conn.execute(
        "SELECT key, role, body, source, context_json, metadata_json FROM messages WHERE key = ?", (message_id,)
    ).fetchone()
    if row is None:
        raise TurnNotFound(str(message_id), "message")
    seg, seq, _ = unpack_key(message_id)
    return stored_message(turn_at(conn, seg, seq), row, load_origins(conn))


def tool_calls(conn: sqlite3.Connection, turn_id: str) -> list[ToolCallRecord]:
    """The tool calls of a turn with their arguments and results."""
    seg, seq, _ = turn_position(conn, turn_id)
    rows = conn.execute(
        "SELECT t.key, t.call_id, t.tool_name, t.message_key, t.result_key, t.status, t.error, "
        "t.spawned_session_label, t.started_at, t.completed_at, m.body, r.body FROM tool_calls t "
        "LEFT JOIN messages m ON m.key = t.message_key LEFT JOIN messages r ON r.key = t.result_key "
        "WHERE t.key BETWEEN ? AND ? ORDER BY t.key",
        key_range(seg, seq, seq),
    )
    out: list[ToolCallRecord] = []
    origins = load_origins(conn)
    for key, call_id, name, mkey, rkey, status, error, spawned, started, completed, mbody, rbody in rows:
        arguments: dict[str, object] = {}
        if mbody is not None:
            msg = decode_body(mbody, origins)
            for call in getattr(msg, "tool_calls", ()):
                if call.id == call_id:
                    arguments = call.arguments
        result = decode_body(rbody, origins) if rbody is not None else None
        out.append(
            ToolCallRecord(
                call_id=call_id,
                tool_name=name,
                arguments=arguments,
                status=status,
                started_at=started,
                completed_at=completed,
                error=error,
                spawned_session_label=spawned,
                turn_id=turn_id,
                sequence=unpack_key(key)[2],
                message_id=mkey,
                result_message_id=rkey,
                result=result if isinstance(result, ToolResultMessage) else None,
            )
        )
    return out


def compaction(conn: sqlite3.Connection, turn_id: str) -> CompactionRecord | None:
    """The compaction details of a compaction turn, or ``None`` for a normal turn."""
    fetch_turn(conn, turn_id)
    row = conn.execute(f"SELECT {COMPACTION_COLUMNS} FROM compactions WHERE turn_id = ?", (turn_id,)).fetchone()
    return None if row is None else compaction_from_row(row)


def contains(
    conn: sqlite3.Connection, head_id: str, segment_id: int, seq: int, cache: dict[int, tuple[int | None, int]]
) -> bool:
    """Does the ancestry of ``head_id`` include the turn at ``(segment_id, seq)``? (segment walk, cached)."""
    seg_row = conn.execute("SELECT segment_id, seq FROM turns WHERE id = ?", (head_id,)).fetchone()
    seg: int | None = int(seg_row[0])
    hi = int(seg_row[1])
    while seg is not None:
        if seg == segment_id:
            return seq <= hi
        if seg not in cache:
            p = conn.execute("SELECT parent_segment_id, parent_seq FROM segments WHERE id = ?", (seg,)).fetchone()
            cache[seg] = (p[0], p[1] if p[1] is not None else -1)
        seg, hi = cache[seg]
    return False
