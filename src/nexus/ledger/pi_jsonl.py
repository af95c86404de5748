"""Import and export of pi-coding-agent session files (JSONL, header ``version`` 3, ``id``/``parentId`` tree).

Import maps pi's entry tree onto turns: a turn starts at each user message, at each
``compaction`` entry, and at each child of a branch point; everything else (assistant and
tool-result messages, ``model_change``, ``thinking_level_change``, labels, custom entries)
joins the turn of its parent entry. Messages become ledger messages (their pi entry id and
timestamp kept in the message metadata); other entries are kept verbatim in the turn's
metadata (``pi_entries``) so an export writes them back. The leaf of the last entry in the
file becomes the imported session; every other leaf becomes a fork session. The whole file
is imported in one transaction: a bad line imports nothing.

pi has no turn status. A turn that did not complete (``aborted``, ``failed``) is exported with
a ``custom`` entry (``customType`` :data:`TURN_STATUS_TYPE`, ``data`` = status, stop reason,
error) after its messages: pi keeps such entries for extensions and leaves them out of the
model's context, and an import reads the status back from it, so a round trip keeps every status.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nexus._dataclass import dataclass
from nexus.ledger import _read, _sessions, _turns, labels
from nexus.ledger._pi_messages import PI_ROLES, PiShapeError, entry_problem, from_pi, json_problem, pi_json, to_pi
from nexus.ledger._write import TurnOutcome, move_pointer
from nexus.ledger.errors import LedgerError, PiFormatError
from nexus.ledger.records import CLOSED_STATUSES, CompactionRecord, ImportResult, NewSession, TurnDetails
from nexus.llm import AssistantMessage, Message, UserMessage, now_ms

if TYPE_CHECKING:
    from nexus.ledger._sqlite import Database


class OnDatabase(Protocol):
    """What the import and export need of a ledger: its database (a ``Ledger`` is one)."""

    @property
    def database(self) -> Database: ...


SUPPORTED_VERSIONS = (2, 3)
_MODELLED = ("message", "compaction")

TURN_STATUS_TYPE = "nexus.turn_status"
"""The ``customType`` of the custom entry that carries a non-completed turn's status (module docstring)."""


@dataclass(slots=True)
class _Entry:
    line: int
    raw: dict[str, Any]
    message: Message | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return str(self.raw["id"])

    @property
    def parent(self) -> str | None:
        parent = self.raw.get("parentId")
        return None if parent is None else str(parent)


@dataclass(slots=True)
class _Group:
    """The entries that become one turn."""

    entries: list[_Entry]
    parent: _Group | None
    turn_id: str = ""


def _parse(path: Path) -> tuple[dict[str, Any], list[_Entry]]:
    where = str(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise PiFormatError(where, 1, f"not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise LedgerError(
            f"cannot read the pi session file {where} ({exc.strerror or exc}); give the path of a .jsonl file. "
            "Nothing was imported"
        ) from exc
    header: dict[str, Any] | None = None
    entries: list[_Entry] = []
    seen: set[str] = set()
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            raw = pi_json(text)
        except json.JSONDecodeError as exc:
            raise PiFormatError(where, number, f"not valid JSON ({exc.msg}); the file may be truncated") from exc
        except (RecursionError, ValueError) as exc:  # too deep, a number of 4300+ digits, a lone surrogate
            raise PiFormatError(where, number, json_problem(exc)) from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise PiFormatError(where, number, "an entry must be a JSON object with a string 'type'")
        if header is None:
            header = _check_header(where, number, raw)
            continue
        entries.append(_check_entry(where, number, raw, seen))
    if header is None:
        raise PiFormatError(where, 1, "empty file: a pi session starts with a {'type': 'session'} header line")
    return header, entries


def _check_header(where: str, number: int, raw: dict[str, Any]) -> dict[str, Any]:
    if raw.get("type") != "session":
        raise PiFormatError(where, number, f"the first entry must be the session header, got type {raw['type']!r}")
    version = raw.get("version", 1)
    if version not in SUPPORTED_VERSIONS:
        raise PiFormatError(
            where,
            number,
            f"session format version {version!r} is not supported (supported: 2, 3); "
            "open and save the file with a current pi first",
        )
    return raw


def _check_entry(where: str, number: int, raw: dict[str, Any], seen: set[str]) -> _Entry:
    if (problem := entry_problem(raw)) is not None:
        raise PiFormatError(where, number, problem)
    entry_id = raw.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        raise PiFormatError(where, number, "entry has no string 'id'")
    if entry_id in seen:
        raise PiFormatError(where, number, f"duplicate entry id {entry_id!r}")
    if "parentId" not in raw:
        raise PiFormatError(where, number, f"entry {entry_id!r} has no 'parentId' (use null for a root)")
    parent = raw["parentId"]
    if parent is not None and parent not in seen:
        raise PiFormatError(where, number, f"entry {entry_id!r} has parentId {parent!r}, which no earlier line defines")
    seen.add(entry_id)
    entry = _Entry(number, raw)
    if raw["type"] == "message":
        msg = raw.get("message")
        if not isinstance(msg, dict):
            raise PiFormatError(where, number, "a message entry needs a 'message' object")
        if msg.get("role") in PI_ROLES:
            try:
                entry.message, entry.extra = from_pi(msg)
            except (PiShapeError, TypeError, ValueError) as exc:
                raise PiFormatError(where, number, f"invalid {msg.get('role')} message: {exc}") from exc
    return entry


def _group(entries: list[_Entry]) -> tuple[list[_Group], dict[str, _Group]]:
    """Split the entry tree into turns (see the module docstring)."""
    children: dict[str | None, int] = {}
    for e in entries:
        children[e.parent] = children.get(e.parent, 0) + 1
    groups: list[_Group] = []
    of: dict[str, _Group] = {}
    for e in entries:
        parent_group = None if e.parent is None else of[e.parent]
        starts = (
            parent_group is None
            or (isinstance(e.message, UserMessage) and any(x.message is not None for x in parent_group.entries))
            or e.raw["type"] == "compaction"
            or children.get(e.parent, 0) > 1
            or parent_group.entries[-1].id != e.parent
        )
        if starts:
            group = _Group([e], parent_group)
            groups.append(group)
        else:
            assert parent_group is not None
            group = parent_group
            group.entries.append(e)
        of[e.id] = group
    return groups, of


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _ms(iso: Any) -> int:
    try:
        return int(datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return now_ms()


@dataclass(slots=True)
class _GroupParts:
    """One group's entries by what they become: messages (with pi's ids), kept entries, its ending."""

    messages: list[Message] = field(default_factory=list)
    meta: list[dict[str, object] | None] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    compaction: _Entry | None = None
    ending: dict[str, Any] = field(default_factory=dict)


def _parts(group: _Group, state: dict[str, Any], result: ImportResult) -> _GroupParts:
    """Sort a group's entries; model and thinking changes update ``state`` as they come."""
    parts = _GroupParts()
    for e in group.entries:
        kind = str(e.raw["type"])
        if kind == "custom" and e.raw.get("customType") == TURN_STATUS_TYPE:
            parts.ending = _turn_ending(e.raw.get("data"))
            continue
        if e.message is not None:
            m: dict[str, object] = {"pi_id": e.id, "pi_ts": e.raw.get("timestamp")}
            if e.extra:
                m["pi_extra"] = e.extra
            parts.messages.append(e.message)
            parts.meta.append(m)
            continue
        if kind == "model_change":
            state["provider"], state["model"] = e.raw.get("provider"), e.raw.get("modelId")
        elif kind == "thinking_level_change":
            state["thinking"] = e.raw.get("thinkingLevel")
        if kind == "compaction":
            parts.compaction = e
        result.kept_entries[kind] = result.kept_entries.get(kind, 0) + 1
        parts.kept.append({"at": len(parts.messages), "entry": e.raw})
    return parts


def _write_group(conn: Any, label: str, group: _Group, state: dict[str, Any], result: ImportResult) -> None:
    """Write one group as a turn (its parent group is already written)."""
    parts = _parts(group, state, result)
    messages, meta, kept, ending = parts.messages, parts.meta, parts.kept, parts.ending
    for msg in messages:
        if isinstance(msg, AssistantMessage) and msg.model:
            state["provider"], state["model"] = msg.provider, msg.model
    n_query = 0
    while n_query < len(messages) and isinstance(messages[n_query], UserMessage):
        n_query += 1
    parent_id = None if group.parent is None else group.parent.turn_id
    metadata: dict[str, object] = {"pi_entries": kept} if kept else {}
    if state.get("thinking"):
        metadata["thinking_level"] = state["thinking"]
    compaction = None
    if parts.compaction is not None:
        compaction = _compaction_of(parts.compaction, parent_id, state)
        result.compactions += 1
    first_ts = _ms(group.entries[0].raw.get("timestamp"))
    fields = TurnDetails(
        model=state.get("model"), provider=state.get("provider"), metadata=metadata or None, started_at=first_ts
    )
    outcome = TurnOutcome(
        status=ending.get("status", "completed"),
        response_messages=messages[n_query:],
        stop_reason=ending.get("stop_reason"),
        error=ending.get("error"),
        compaction=compaction,
        completed_at=_ms(group.entries[-1].raw.get("timestamp")),
        message_metadata=meta[n_query:],
    )
    group.turn_id = _turns.write_turn(
        conn, label, None, parent_id, messages[:n_query], fields, outcome, if_head_moved="branch", move=False
    )
    if n_query:  # query metadata (pi ids) is stored after the fact: insert_messages took the response's only
        _set_query_metadata(conn, group.turn_id, meta[:n_query])
    result.turns += 1
    result.messages += len(messages)


def _turn_ending(data: Any) -> dict[str, Any]:
    """The status, stop reason and error of a :data:`TURN_STATUS_TYPE` entry's ``data`` (what is valid of it)."""
    if not isinstance(data, dict) or data.get("status") not in CLOSED_STATUSES:
        return {}
    ending: dict[str, Any] = {"status": data["status"]}
    if isinstance(data.get("stopReason"), str):
        ending["stop_reason"] = data["stopReason"]
    if isinstance(data.get("error"), dict | str):
        ending["error"] = data["error"]
    return ending


def _status_entry(turn: Any) -> dict[str, Any]:
    """The custom entry that keeps a non-completed turn's status in a pi file."""
    data: dict[str, Any] = {"status": turn.status}
    if turn.stop_reason:
        data["stopReason"] = turn.stop_reason
    if turn.error:
        data["error"] = turn.error
    ts = _iso(turn.completed_at or turn.started_at)
    return {"type": "custom", "timestamp": ts, "customType": TURN_STATUS_TYPE, "data": data}


def _set_query_metadata(conn: Any, turn_id: str, meta: list[dict[str, object] | None]) -> None:
    from nexus.ledger._rows import dumps_opt, turn_position
    from nexus.ledger._schema import pack_key

    seg, seq, _ = turn_position(conn, turn_id)
    conn.executemany(
        "UPDATE messages SET metadata_json = ? WHERE key = ?",
        [(dumps_opt(m), pack_key(seg, seq, i)) for i, m in enumerate(meta)],
    )


def _compaction_of(e: _Entry, parent_id: str | None, state: dict[str, Any]) -> CompactionRecord:
    first_kept = e.raw.get("firstKeptEntryId")
    kept_group = state["of"].get(first_kept) if isinstance(first_kept, str) else None
    extra = {k: e.raw[k] for k in ("details", "fromHook") if k in e.raw}
    return CompactionRecord(
        summary=str(e.raw["summary"]),
        summarized_through_turn_id=parent_id or "",
        first_kept_turn_id=kept_group.turn_id if kept_group is not None and kept_group.turn_id else None,
        tokens_before=int(e.raw.get("tokensBefore") or 0),  # checked at parse (entry_problem)
        model=str(state.get("model") or "unknown"),
        provider=state.get("provider"),
        trigger="manual" if e.raw.get("fromHook") else "context_limit",
        metadata={"pi": extra} if extra else None,
    )


def import_pi_session(ledger: OnDatabase, path: str | Path, label: str | None = None) -> ImportResult:
    """Import a pi session file as turns and sessions, in one transaction.

    Raises :class:`PiFormatError` naming the line for a truncated, invalid or wrong-version
    file (nothing is imported then) and ``SessionExistsError`` if ``label`` is taken.
    """
    path = Path(path)
    header, entries = _parse(path)
    groups, of = _group(entries)
    main = label or labels.imported_label(header.get("id"))
    parents = {e.parent for e in entries}
    leaves = [e for e in entries if e.id not in parents]

    def run(conn: Any) -> ImportResult:
        result = ImportResult(session_label=main)
        meta: dict[str, object] = {"pi": {"header": header, "file": str(path)}}
        _sessions.create(conn, NewSession(main, origin="import", origin_session_id=header.get("id"), metadata=meta))
        state: dict[str, Any] = {"of": of}
        for group in groups:
            _write_group(conn, main, group, state, result)
        now = now_ms()
        if entries:
            move_pointer(conn, main, of[entries[-1].id].turn_id, "import", now)
        forks = [e for e in leaves if e is not entries[-1]]
        for n, leaf in enumerate(forks, start=1):
            fork = f"{main}-fork-{n}"
            _sessions.create(
                conn,
                NewSession(fork, origin="fork", parent_session_label=main, head_turn_id=of[leaf.id].turn_id),
                reason="import",
            )
            result.fork_labels.append(fork)
        return result

    return ledger.database.write(run)


# --------------------------------------------------------------------------- export


def _entry_id(taken: set[str], wanted: Any = None) -> str:
    if isinstance(wanted, str) and wanted and wanted not in taken:
        taken.add(wanted)
        return wanted
    while True:
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            taken.add(candidate)
            return candidate


def export_pi_session(ledger: OnDatabase, session_label: str, path: str | Path) -> Path:
    """Write a session's history (root to head) as a pi session file pi can open, all at once; a symlink is
    written through, a device or FIFO written into, an existing file keeps its mode (``nexus._replace_file``)."""
    from nexus._replace_file import replace_file

    replace_file(Path(path), pi_session_text(ledger, session_label))
    return Path(path)


def pi_session_text(ledger: OnDatabase, session_label: str) -> str:
    """A session's history as the text of a pi session file (what :func:`export_pi_session` writes).

    For callers that put the file somewhere themselves (stdout, their own atomic write).
    """

    def run(conn: Any) -> tuple[Any, list[Any], dict[str, list[Any]], dict[str, Any]]:
        session = _sessions.resolve(conn, session_label)
        turns = [] if session.thread_id is None else _read.path_turns(conn, session.thread_id)
        compactions = {t.id: _read.compaction(conn, t.id) for t in turns if t.turn_type == "compaction"}
        return session, turns, {t.id: _read.turn_messages(conn, t.id) for t in turns}, compactions

    session, turns, messages, compactions = ledger.database.read(run)
    lines = _export_lines(session, turns, messages, compactions)
    return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines)


def _export_lines(
    session: Any, turns: list[Any], messages: dict[str, list[Any]], compactions: dict[str, Any]
) -> list[dict[str, Any]]:
    pi_meta = (session.metadata or {}).get("pi", {}) if isinstance(session.metadata, dict) else {}
    header = dict(pi_meta.get("header") or {})
    header.update(type="session", version=3)
    header.setdefault("id", str(uuid.uuid4()))
    header.setdefault("timestamp", _iso(session.created_at))
    header.setdefault("cwd", (turns[-1].workspace_path if turns else None) or os.getcwd())
    out: list[dict[str, Any]] = [header]
    taken: set[str] = set()
    first_entry: dict[str, str] = {}
    state: dict[str, Any] = {"prev": None, "model": None}

    def emit(entry: dict[str, Any], turn_id: str) -> None:
        entry_id = _entry_id(taken, entry.pop("id", None))
        entry.pop("parentId", None)
        full = {"type": entry.pop("type"), "id": entry_id, "parentId": state["prev"], **entry}
        state["prev"] = entry_id
        first_entry.setdefault(turn_id, entry_id)
        if full["type"] == "message":  # a compaction's firstKeptEntryId should name a message
            first_entry.setdefault("msg:" + turn_id, entry_id)
        out.append(full)

    _emit_initial_model(turns, messages, state, emit)

    for turn in turns:
        kept = (turn.metadata or {}).get("pi_entries", []) if isinstance(turn.metadata, dict) else []
        has_raw_compaction = any(k["entry"].get("type") == "compaction" for k in kept)
        comp = compactions.get(turn.id)
        if comp is not None and not has_raw_compaction:
            emit(_compaction_entry(comp, first_entry, turn), turn.id)
        queue = list(kept)
        for i, stored in enumerate(messages[turn.id]):
            while queue and queue[0]["at"] <= i:
                _emit_kept(queue.pop(0)["entry"], state, emit, turn.id)
            _emit_message(stored, state, emit, turn)
        for k in queue:
            _emit_kept(k["entry"], state, emit, turn.id)
        if turn.status != "completed":
            emit(_status_entry(turn), turn.id)
    return out


def _emit_initial_model(turns: list[Any], messages: dict[str, list[Any]], state: dict[str, Any], emit: Any) -> None:
    """pi files start with a ``model_change``; write one unless the first kept pi entry is one."""
    if not turns:
        return
    kept = (turns[0].metadata or {}).get("pi_entries", []) if isinstance(turns[0].metadata, dict) else []
    if kept and kept[0]["at"] == 0 and kept[0]["entry"].get("type") == "model_change":
        return
    provider, model = turns[0].provider, turns[0].model
    for turn in turns:
        found = [m.message for m in messages[turn.id] if isinstance(m.message, AssistantMessage) and m.message.model]
        if found:
            provider, model = found[0].provider, found[0].model
            break
    if model:
        state["model"] = (provider, model)
        stamps = [m.message.timestamp for m in messages[turns[0].id][:1] if m.message.timestamp]  # sent before
        ts = _iso(min([turns[0].started_at, *stamps]))  # its turn opened: the model_change is not after it
        emit({"type": "model_change", "timestamp": ts, "provider": provider or "", "modelId": model}, turns[0].id)


def _emit_kept(raw: dict[str, Any], state: dict[str, Any], emit: Any, turn_id: str) -> None:
    entry = dict(raw)
    if entry.get("type") == "model_change":
        state["model"] = (entry.get("provider"), entry.get("modelId"))
    emit(entry, turn_id)


def _emit_message(stored: Any, state: dict[str, Any], emit: Any, turn: Any) -> None:
    msg = stored.message
    meta = stored.metadata if isinstance(stored.metadata, dict) else {}
    if isinstance(msg, AssistantMessage) and msg.model and state["model"] != (msg.provider, msg.model):
        state["model"] = (msg.provider, msg.model)
        ts = _iso(msg.timestamp)
        emit({"type": "model_change", "timestamp": ts, "provider": msg.provider, "modelId": msg.model}, turn.id)
    entry = {
        "type": "message",
        "id": meta.get("pi_id"),
        "timestamp": meta.get("pi_ts") or _iso(msg.timestamp or turn.started_at),
        "message": to_pi(msg, meta.get("pi_extra")),
    }
    emit(entry, turn.id)


def _compaction_entry(comp: CompactionRecord, first_entry: dict[str, str], turn: Any) -> dict[str, Any]:
    kept = comp.first_kept_turn_id or ""
    entry: dict[str, Any] = {
        "type": "compaction",
        "timestamp": _iso(turn.started_at),
        "summary": comp.summary,
        "firstKeptEntryId": first_entry.get("msg:" + kept, first_entry.get(kept)),
        "tokensBefore": comp.tokens_before,
    }
    pi_extra = (comp.metadata or {}).get("pi") if isinstance(comp.metadata, dict) else None
    if isinstance(pi_extra, dict):
        entry.update(pi_extra)
    return entry


__all__ = ["SUPPORTED_VERSIONS", "TURN_STATUS_TYPE", "export_pi_session", "import_pi_session", "pi_session_text"]
