"""Rescue files: the outcome of a turn whose final write failed (disk full, database held), kept on disk.

A reply the user has seen must not be lost because ``agents.db`` could not take it. When
:meth:`Ledger.write_turn` fails for an opened turn with :class:`LedgerFullError` or
:class:`LedgerBusyError`, the outcome (status, response messages, stop reason, error) goes to
a JSON file, tried in order:

1. ``<ledger dir>/rescued/turn-<id>.json`` (next to ``agents.db``);
2. ``<temp dir>/nexus-rescued-<uid>/<hash of the ledger path>/turn-<id>.json`` (another
   filesystem, usually, when the ledger's disk is the full one); the only place for a PostgreSQL ledger
   (hashed by its URL, password left out): before, its URL was taken for a path, and the files landed in
   a ``postgresql:/…/rescued`` folder under whatever directory the process ran in.

Each file is written whole or not at all (temporary file, fsync, rename). It holds the reply as
plain ``text`` too, so a user can read it with any tool. ``Ledger.recover()`` finishes the
open turn from its rescue file (status as it really was) once the writer's process has ended,
then deletes the file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nexus._dataclass import dataclass
from nexus.ledger.errors import LedgerError, LedgerFullError, TurnNotSavedError
from nexus.llm import AssistantMessage, Message, message_from_dict, message_to_dict

FORMAT = "nexus-rescued-turn/1"


@dataclass(slots=True, frozen=True)
class RescuedTurn:
    """What a rescue file holds: how the turn ended, enough to close it in the ledger later."""

    turn_id: str
    session_label: str
    status: str
    response_messages: Sequence[Message]
    stop_reason: str | None
    error: dict[str, object] | str | None
    queue_items: Sequence[str] = ()
    """Broker queue items the turn consumed: marked delivered when the turn is put in the ledger."""


def rescue_dirs(database: str) -> list[Path]:
    """Where rescue files of the ledger at ``database`` go, first choice first (see the module docstring)."""
    import hashlib  # only when a write failed or recover() looks for a rescue file: not on every start
    import tempfile

    served = "://" in database  # a server's URL (its password left out) is no place on this disk
    real = database if served else os.path.realpath(database)
    digest = hashlib.sha256(real.encode("utf-8")).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    beside = [] if served else [Path(real).parent / "rescued"]
    return [*beside, Path(tempfile.gettempdir()) / f"nexus-rescued-{uid}" / digest]


def reply_text(messages: Sequence[Message]) -> str:
    """The assistant text of the response, for a human reading the file."""
    parts = [m.text for m in messages if isinstance(m, AssistantMessage) and m.text]
    return "\n\n".join(parts)


def save(database: str, turn: RescuedTurn) -> Path | None:
    """Write ``turn``'s rescue file to the first place that takes it; ``None`` if none did."""
    body = {
        "format": FORMAT,
        "turn_id": turn.turn_id,
        "session": turn.session_label,
        "status": turn.status,
        "stop_reason": turn.stop_reason,
        "error": turn.error,
        "text": reply_text(turn.response_messages),
        "response_messages": [message_to_dict(m) for m in turn.response_messages],
        "queue_items": list(turn.queue_items),
    }
    data = json.dumps(body, ensure_ascii=False, indent=1).encode("utf-8")
    for folder in rescue_dirs(database):
        path = folder / f"turn-{turn.turn_id}.json"
        if _write_whole(path, data):
            return path
    return None


def not_saved(database: str, turn: RescuedTurn, exc: LedgerError) -> TurnNotSavedError:
    """Save ``turn`` (its final write failed with ``exc``) and return the error that says where it went."""
    path = save(database, turn)
    cause = "the disk is full" if isinstance(exc, LedgerFullError) else "the database is held by another process"
    if path is None:
        where = "it could not be saved anywhere else either: only what was shown on screen is left of it"
    else:
        where = (
            f"the reply is kept in {path}, and the next nexus command run after this one puts it in the ledger "
            "(once there is room / the other process let go)"
        )
    message = f"could not save turn {turn.turn_id} of session {turn.session_label!r}: {cause} ({exc}); {where}"
    return TurnNotSavedError(message, None if path is None else str(path), exc)


def _write_whole(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically; False (and nothing left behind) on any OS error."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def find(database: str, turn_id: str) -> Path | None:
    """The rescue file of ``turn_id``, if one exists."""
    for folder in rescue_dirs(database):
        path = folder / f"turn-{turn_id}.json"
        if path.is_file():
            return path
    return None


def load(path: Path) -> RescuedTurn | None:
    """Read a rescue file; ``None`` if it is not one (unreadable, another format, bad messages)."""
    try:
        body: Any = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            return None
        messages = [message_from_dict(m) for m in body["response_messages"]]
        return RescuedTurn(
            turn_id=str(body["turn_id"]),
            session_label=str(body["session"]),
            status=str(body["status"]),
            response_messages=messages,
            stop_reason=body.get("stop_reason"),
            error=body.get("error"),
            queue_items=[str(item) for item in body.get("queue_items", [])],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def discard(path: Path) -> None:
    """Remove a rescue file whose turn is in the ledger now (a failure leaves it: it is harmless)."""
    with contextlib.suppress(OSError):
        path.unlink()
