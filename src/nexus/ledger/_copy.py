"""``nexus db copy``: a whole ledger from one database into another (SQLite <-> PostgreSQL), row for row.

Both backends hold the same tables with the same columns (PostgreSQL's migrations follow SQLite's
versions), so a copy is every row of every table (the routing index aside: see :data:`TABLES`), read in
one snapshot of the source and written in one transaction into an empty target, foreign keys checked at
its end. Ids are kept (turn and message ids,
the integer keys of segments, origins and the pointer log, the queue's row numbers), so the copy is the
same ledger: a copy back compares equal, table for table.

An SQLite source is read on its own read-only connection by :class:`~nexus.ledger._salvage.SalvageReader`,
which reads around damaged pages: from a damaged file the copy holds every row that still reads, the references
to what was lost made whole (:func:`~nexus.ledger._salvage.repair_references`), and :attr:`Copied.lost` says
what was not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger._rows import is_postgres
from nexus.ledger._salvage import Loss, SalvageReader, repair_references
from nexus.ledger._sql_db import SqlDatabase
from nexus.ledger._sqlite import Database
from nexus.ledger.errors import LedgerError

TABLES: tuple[tuple[str, str], ...] = (
    ("segments", "id, parent_segment_id, parent_seq, root_turn_id"),
    ("origins", "id, api, provider, model"),
    ("system_prompts", "hash, text, created_at"),
    (
        "turns",
        "id, parent_turn_id, segment_id, seq, session_label, turn_type, status, started_at, completed_at, model, "
        "provider, role, toolset_name, tools_available, permissions_granted, permissions_used, input_tokens, "
        "output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, total_tokens, thread_total_tokens, "
        "cost, query_count, message_count, response_ordinal, has_children, tool_call_count, stop_reason, error_json, "
        "run_id, source_event_id, workspace_path, persona_id, system_prompt_hash, owner, metadata_json",
    ),
    ("messages", "key, role, body, source, context_json, metadata_json"),
    (
        "tool_calls",
        "key, call_id, tool_name, message_key, result_key, status, error, spawned_session_label, started_at, "
        "completed_at",
    ),
    ("turn_journal", "turn_id, ordinal, kind, body, created_at, slot"),
    (
        "compactions",
        "turn_id, summary, summarized_through_turn_id, first_kept_turn_id, turns_summarized, compaction_type, model, "
        "provider, tokens_before, tokens_after, summary_tokens, summarization_input_tokens, "
        "summarization_output_tokens, duration_ms, trigger, metadata_json",
    ),
    (
        "sessions",
        "label, thread_id, persona_id, is_subagent, parent_session_label, parent_turn_id, spawn_tool_call_id, "
        "task_description, task_status, routing_key, origin, origin_session_id, created_at, updated_at, status, "
        "metadata_json",
    ),
    ("session_history", "id, session_label, thread_id, changed_at, reason"),
    ("session_aliases", "alias, session_label, created_at, reason"),
    (
        "queue_items",
        "rowid, id, session_label, message_json, mode, status, enqueued_at, started_at, completed_at, error, turn_id, "
        "metadata_json, agent_id, message_id, sender, attempts, awaits_reply, claimed_by, claim_epoch, overflow_cap, "
        "overflow_to",
    ),
    ("agents", "id, name, role, persona_id, session_label, config_json, status, created_at, updated_at"),
    (
        "broker_messages",
        "id, from_agent, to_agent, session_label, content, reply_to, wait_for_reply, status, created_at, metadata_json",
    ),
    (
        "deliveries",
        "id, turn_id, queue_item_id, session_label, run_id, adapter, account_id, target_json, path, status, "
        "message_ids_json, error, attempts, blocks_sent, started_at, completed_at",
    ),
    ("session_leases", "session_label, holder, epoch, expires_at, acquired_at"),
    (
        "route_decisions",
        "id, created_at, task, agent_id, conversation_id, routing_mode, arm, decision, turn_id, confidence, "
        "alternatives_json, embedder, took_ms, session_label, message_id, outcome_status, outcome_turns, "
        "outcome_tokens, outcome_cost, outcome_at, feedback, feedback_note",
    ),
)
"""Every table of the ledger and its columns, in an order that keeps references before their rows.

Of the routing tables only the decisions (the A/B record and its feedback, which nothing can rebuild): the
index (``route_checkpoints``, ``route_vectors``, SQLite's FTS tables, the watermark in ``route_state``) has a
different shape on each backend and is derived from the turns; the target's first routing use builds it
again, as ``nexus route reindex`` does."""

_KEYED = (("segments", "id"), ("origins", "id"), ("session_history", "id"), ("queue_items", "rowid"))
"""Tables whose integer key a PostgreSQL identity generates: its sequence goes on after the copied keys."""

BATCH = 2000
"""Rows written per statement batch (the source is read lazily where it can be)."""


@dataclass(frozen=True, slots=True)
class Copied:
    """How many rows of each table a copy wrote; from a damaged SQLite file, what it could not read and the
    references it made whole (see :func:`~nexus.ledger._salvage.repair_references`)."""

    rows: dict[str, int]
    lost: dict[str, Loss] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Rows written in all."""
        return sum(self.rows.values())


def table_rows(conn: Any, table: str, columns: str) -> Iterable[tuple[Any, ...]]:
    """Every row of ``table`` in key order (lazily, where the connection can stream)."""
    sql = f"SELECT {columns} FROM {table} ORDER BY {columns.split(',')[0]}"
    stream: Callable[[str], Iterable[tuple[Any, ...]]] | None = getattr(conn, "stream", None)
    return stream(sql) if stream is not None else conn.execute(sql)


def held_rows(conn: Any) -> int:
    """Rows of the tables a used ledger has (0: an empty ledger, a target a copy may write into)."""
    return sum(int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table, _ in TABLES)


def copy_ledger(source: SqlDatabase, target: SqlDatabase, *, postgres_target: bool) -> Copied:
    """Copy every row of ``source`` into the empty ``target`` (blocking; both already at the current schema).

    ``LedgerError`` if the target holds anything: a copy never mixes two ledgers.
    """
    held = target.read(held_rows)
    if held:
        raise LedgerError(
            f"{target.location} already holds a ledger ({held} rows); copy into an empty database "
            "(a new file, or a new PostgreSQL database)"
        )

    if isinstance(source, Database) and source.location != ":memory:":
        reader = SalvageReader(source.location)
        try:
            return target.write(lambda dst: _copy_tables(reader.rows, dst, postgres_target, reader.lost))
        finally:
            reader.close()

    def write(src: Any) -> Copied:
        _unbounded(src)  # the source's snapshot waits while the target writes each batch
        return target.write(lambda dst: _copy_tables(lambda t, c: table_rows(src, t, c), dst, postgres_target, {}))

    return source.read(write)


def _unbounded(conn: Any) -> None:
    """PostgreSQL: lift the transaction's idle and statement bounds (``IDLE_IN_TRANSACTION_S`` and
    ``STATEMENT_TIMEOUT_S`` of ``nexus.ledger.postgres``).

    The idle bound ends a transaction left waiting for its next statement, which only a stalled process does; a
    copy holds two transactions open, each waiting while it works in the other (a batch into a slow target
    may take longer than the bound). The statement bound would cut the read of a large table (one statement,
    streamed) and the commit's check of every reference."""
    if is_postgres(conn):
        conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0; SET LOCAL statement_timeout = 0")


def _copy_tables(
    rows_of: Callable[[str, str], Iterable[tuple[Any, ...]]], dst: Any, postgres_target: bool, lost: dict[str, Loss]
) -> Copied:
    """Inside the target's transaction: every table (``lost``: filled as the source's rows are read), references
    checked at the commit."""
    dst.execute("SET CONSTRAINTS ALL DEFERRED" if postgres_target else "PRAGMA defer_foreign_keys = ON")
    _unbounded(dst)  # and the target's transaction waits while the source reads the next rows
    counts: dict[str, int] = {}
    for table, columns in TABLES:
        marks = ", ".join("?" * len(columns.split(",")))
        insert = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        batch: list[tuple[Any, ...]] = []
        counts[table] = 0
        for row in rows_of(table, columns):
            batch.append(tuple(row))
            if len(batch) >= BATCH:
                dst.executemany(insert, batch)
                counts[table] += len(batch)
                batch = []
        if batch:
            dst.executemany(insert, batch)
            counts[table] += len(batch)
    repaired = repair_references(dst) if lost else {}
    if postgres_target:
        for table, key in _KEYED:
            dst.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'), (SELECT COALESCE(MAX({key}), 0) + 1 "
                f"FROM {table}), false)"
            )
    return Copied(counts, dict(lost), repaired)
