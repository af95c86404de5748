"""Session rows: create, resolve (label -> alias), list, aliases, timeline."""

from __future__ import annotations

import sqlite3

from nexus.ledger._rows import SESSION_COLUMNS, dumps_opt, fetch_session, loads_opt, session_from_row, turn_position
from nexus.ledger._ulid import new_ulid
from nexus.ledger._write import move_pointer
from nexus.ledger.errors import SessionExistsError, SessionNotFound, TurnStateError
from nexus.ledger.records import OPEN_STATUSES, NewSession, Session, SessionQuery, TimelineEntry
from nexus.llm import now_ms


def _taken(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sessions WHERE label = ? UNION ALL SELECT 1 FROM session_aliases WHERE alias = ?",
            (name, name),
        ).fetchone()
        is not None
    )


def create(conn: sqlite3.Connection, new: NewSession, reason: str | None = None) -> Session:
    """Insert a session; its initial pointer (if any) is logged in ``session_history``.

    Without a label one is made up (``fork-<ulid>`` for a fork, ``session-<ulid>`` otherwise); the
    pointer's log reason defaults to ``fork`` for a fork and ``create`` for the rest.
    """
    fork = new.origin == "fork"
    label = new.label if new.label is not None else f"{'fork' if fork else 'session'}-{new_ulid().lower()}"
    reason = reason or ("fork" if fork else "create")
    if _taken(conn, label):
        raise SessionExistsError(label)
    if new.head_turn_id is not None:
        status = turn_position(conn, new.head_turn_id)[2]  # TurnNotFound for an unknown turn
        if status in OPEN_STATUSES:
            raise TurnStateError(
                f"turn {new.head_turn_id!r} is still open ({status}); only finished turns can be session heads"
            )
    persona = new.persona_id
    if persona is None and new.head_turn_id is not None:
        row = conn.execute(
            "SELECT COALESCE(t.persona_id, s.persona_id) FROM turns t LEFT JOIN sessions s "
            "ON s.label = t.session_label WHERE t.id = ?",
            (new.head_turn_id,),
        ).fetchone()
        persona = None if row is None else row[0]
    now = now_ms()
    conn.execute(
        "INSERT INTO sessions (label, thread_id, persona_id, is_subagent, parent_session_label, parent_turn_id,"
        " spawn_tool_call_id, task_description, task_status, routing_key, origin, origin_session_id, created_at,"
        " updated_at, metadata_json) VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            label,
            persona or "default",
            int(new.is_subagent),
            new.parent_session_label,
            new.parent_turn_id,
            new.spawn_tool_call_id,
            new.task_description,
            new.task_status,
            new.routing_key,
            new.origin,
            new.origin_session_id,
            now,
            now,
            dumps_opt(new.metadata),
        ),
    )
    if new.head_turn_id is not None:
        move_pointer(conn, label, new.head_turn_id, reason, now)
    return fetch_session(conn, label)


def resolve(conn: sqlite3.Connection, name: str) -> Session:
    """Label first, then alias; raises :class:`SessionNotFound`."""
    row = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE label = ?", (name,)).fetchone()
    if row is None:
        row = conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions WHERE label = "
            "(SELECT session_label FROM session_aliases WHERE alias = ?)",
            (name,),
        ).fetchone()
    if row is None:
        raise SessionNotFound(name)
    return session_from_row(row)


def resolve_label(conn: sqlite3.Connection, name: str) -> str:
    """The real label for a label or alias (cheap path for the hot calls)."""
    if conn.execute("SELECT 1 FROM sessions WHERE label = ?", (name,)).fetchone() is not None:
        return name
    row = conn.execute("SELECT session_label FROM session_aliases WHERE alias = ?", (name,)).fetchone()
    if row is None:
        raise SessionNotFound(name)
    return str(row[0])


def add_alias(conn: sqlite3.Connection, alias: str, label: str, reason: str) -> None:
    """Make ``alias`` resolve to session ``label``."""
    fetch_session(conn, label)
    if _taken(conn, alias):
        raise SessionExistsError(alias)
    conn.execute(
        "INSERT INTO session_aliases (alias, session_label, created_at, reason) VALUES (?, ?, ?, ?)",
        (alias, label, now_ms(), reason),
    )


def aliases(conn: sqlite3.Connection, label: str) -> list[str]:
    """Aliases of a session, oldest first; raises :class:`SessionNotFound` for an unknown label."""
    fetch_session(conn, label)
    rows = conn.execute("SELECT alias FROM session_aliases WHERE session_label = ? ORDER BY created_at", (label,))
    return [str(r[0]) for r in rows]


def list_sessions(conn: sqlite3.Connection, query: SessionQuery) -> list[Session]:
    """Sessions matching every given filter, most recently updated first."""
    where: list[str] = []
    args: list[object] = []
    is_subagent, updated_since, limit = query.is_subagent, query.updated_since, query.limit
    for column, value in (("status", query.status), ("origin", query.origin), ("persona_id", query.persona_id)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if is_subagent is not None:
        where.append("is_subagent = ?")
        args.append(int(is_subagent))
    if updated_since is not None:
        where.append("updated_at >= ?")
        args.append(updated_since)
    sql = f"SELECT {SESSION_COLUMNS} FROM sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY updated_at DESC, label"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(limit)
    return [session_from_row(r) for r in conn.execute(sql, args)]


def timeline(conn: sqlite3.Connection, label: str) -> list[TimelineEntry]:
    """Every logged pointer move of a session, oldest first."""
    fetch_session(conn, label)
    rows = conn.execute(
        "SELECT session_label, thread_id, changed_at, reason FROM session_history WHERE session_label = ? "
        "ORDER BY changed_at, id",
        (label,),
    )
    return [TimelineEntry(str(a), b, int(c), str(d)) for a, b, c, d in rows]


def head_at(conn: sqlite3.Connection, label: str, time_ms: int) -> str | None:
    """The session head as it was at ``time_ms`` (``None`` before the first pointer move)."""
    fetch_session(conn, label)
    row = conn.execute(
        "SELECT thread_id FROM session_history WHERE session_label = ? AND changed_at <= ? "
        "ORDER BY changed_at DESC, id DESC LIMIT 1",
        (label, time_ms),
    ).fetchone()
    return None if row is None else row[0]


def set_fields(conn: sqlite3.Connection, label: str, **values: object) -> None:
    """Update plain session columns (status, task_status) and ``updated_at`` (``label`` may be an alias)."""
    label = resolve_label(conn, label)
    sets = ", ".join(f"{k} = ?" for k in values)
    conn.execute(f"UPDATE sessions SET {sets}, updated_at = ? WHERE label = ?", (*values.values(), now_ms(), label))


def merge_metadata(conn: sqlite3.Connection, label: str, values: dict[str, object]) -> None:
    """Merge ``values`` into a session's ``metadata`` (a ``None`` value removes its key); ``label`` may be an alias.

    Read and written in the caller's write transaction, so two updates of different keys both stay.
    """
    label = resolve_label(conn, label)
    row = conn.execute("SELECT metadata_json FROM sessions WHERE label = ?", (label,)).fetchone()
    current = loads_opt(row[0]) if row is not None else None
    merged = {**(current if isinstance(current, dict) else {}), **values}
    kept = {key: value for key, value in merged.items() if value is not None}
    conn.execute(
        "UPDATE sessions SET metadata_json = ?, updated_at = ? WHERE label = ?",
        (dumps_opt(kept or None), now_ms(), label),
    )


def ensure(conn: sqlite3.Connection, new: NewSession) -> Session:
    """Label -> alias -> create (the spec's lookup order for an incoming message)."""
    if new.label is not None:
        try:
            return resolve(conn, new.label)
        except LookupError:
            pass
    return create(conn, new)
