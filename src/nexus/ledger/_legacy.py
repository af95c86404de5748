"""The ledger's synchronous methods, kept while the engine, broker, server and CLI move to the async stores.

Each is one line over :class:`~nexus.ledger.Ledger`'s stores (``ledger.turns``, ``ledger.sessions``,
...), driven to its end inline (:func:`~nexus.ledger._sql_db.run_inline`), which only an SQLite ledger
allows. New code awaits the stores instead; this module goes once the last caller has moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nexus.ledger._sql_db import run_inline
from nexus.ledger.records import (
    HEAD,
    CompactionRecord,
    IfHeadMoved,
    ImportResult,
    JournalEntry,
    JournalMessage,
    JournalReply,
    JournalToolCall,
    NewSession,
    Session,
    SessionQuery,
    StoredMessage,
    TimelineEntry,
    ToolCallRecord,
    Turn,
    TurnDetails,
    TurnOpen,
    TurnWrite,
)
from nexus.llm import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage

if TYPE_CHECKING:
    from nexus.ledger.protocols import PiFiles, PointerLog, SessionStore, TurnStore, TurnTree

    class _Turns(TurnStore, TurnTree, Protocol):
        """The SQL turn store: the turns and their tree."""

    class _Sessions(SessionStore, PointerLog, Protocol):
        """The SQL session store: the sessions and their pointer log."""


class LegacyTurns:
    """``ledger.turns(label, limit=)``: the old synchronous call of what is now ``await ledger.turns.path(...)``."""

    def __call__(self, session_label: str, *, limit: int | None = None) -> list[Turn]:
        """The turns of a session's history, root first; with ``limit``, only the newest ``limit`` of them."""
        return run_inline(self.path(session_label, limit=limit))  # type: ignore[attr-defined]


class LegacyLedger:
    """The synchronous face of :class:`~nexus.ledger.Ledger` (see the module docstring)."""

    turns: _Turns
    sessions: _Sessions
    pi: PiFiles

    # ------------------------------------------------------------------ sessions

    def create_session(self, label: str | None = None, **fields: Any) -> Session:
        """Create a session (see :class:`NewSession` for the fields); ``SessionExistsError`` on a taken name."""
        return run_inline(self.sessions.create(NewSession(label or None, **fields)))

    def get_session(self, label: str) -> Session:
        """The session with exactly this label; raises ``SessionNotFound``."""
        return run_inline(self.sessions.get(label))

    def resolve_session(self, label_or_alias: str) -> Session:
        """Look a session up by label, then by alias; raises ``SessionNotFound``."""
        return run_inline(self.sessions.resolve(label_or_alias))

    def ensure_session(self, name: str, **create_kwargs: Any) -> Session:
        """Label -> alias -> create: the lookup order the spec gives for incoming messages."""
        return run_inline(self.sessions.ensure(NewSession(name, **create_kwargs)))

    def add_alias(self, alias: str, session_label: str, *, reason: str = "manual") -> None:
        """Make ``alias`` another name of a session."""
        run_inline(self.sessions.add_alias(alias, session_label, reason=reason))

    def aliases(self, session_label: str) -> list[str]:
        """The aliases of a session; raises ``SessionNotFound`` for an unknown label."""
        return run_inline(self.sessions.aliases(session_label))

    def list_sessions(self, **filters: Any) -> list[Session]:
        """Sessions matching all given filters (see :class:`SessionQuery`), most recently updated first."""
        return run_inline(self.sessions.list(SessionQuery(**filters)))

    def archive(self, session_label: str) -> None:
        """Mark a session archived (hidden from default lists; nothing is ever deleted)."""
        run_inline(self.sessions.update(session_label, status="archived"))

    def set_task_status(self, session_label: str, task_status: str) -> None:
        """Update a sub-agent session's ``task_status``."""
        run_inline(self.sessions.update(session_label, task_status=task_status))

    def head(self, session_label: str) -> Turn | None:
        """The session's head turn, or ``None`` for an empty session."""
        return run_inline(self.sessions.head(session_label))

    def fork(self, turn_id: str, label: str | None = None, **create_kwargs: Any) -> Session:
        """A new session (``origin='fork'``) whose head is ``turn_id``; nothing is copied."""
        new = NewSession(label or None, origin="fork", head_turn_id=turn_id, **create_kwargs)
        return run_inline(self.sessions.create(new))

    def move_pointer(self, session_label: str, turn_id: str | None) -> None:
        """Point a session at any finished turn (or ``None``: empty); the move is logged."""
        run_inline(self.sessions.move_pointer(session_label, turn_id))

    def head_at(self, session_label: str, time_ms: int) -> Turn | None:
        """The head the session had at ``time_ms`` (from its pointer log)."""
        return run_inline(self.sessions.head_at(session_label, time_ms))

    def timeline(self, session_label: str) -> list[TimelineEntry]:
        """Every pointer move of a session, oldest first."""
        return run_inline(self.sessions.timeline(session_label))

    def sessions_containing(self, turn_id: str) -> list[str]:
        """Labels of the sessions whose current history includes ``turn_id``."""
        return run_inline(self.sessions.containing(turn_id))

    # ------------------------------------------------------------------ turns

    def open_turn(
        self,
        session_label: str,
        *,
        query_messages: Sequence[Message],
        parent_turn_id: Any = HEAD,
        source: str | None = None,
        context: dict[str, object] | None = None,
        system_prompt: str | None = None,
        role: str = "unified",
        **details: Any,
    ) -> str:
        """Start a turn; the keywords not named here are :class:`TurnDetails` fields."""
        opening = TurnOpen(
            session_label, query_messages, TurnDetails(role=role, **details), parent_turn_id, source, context,
            system_prompt,
        )  # fmt: skip
        return run_inline(self.turns.open(opening))

    def system_prompt(self, prompt_hash: str) -> str | None:
        """The system prompt a turn was sent, by its ``system_prompt_hash`` (None if unknown)."""
        return run_inline(self.turns.system_prompt(prompt_hash))

    def journal(self, entries: Sequence[JournalEntry]) -> None:
        """Journal entries of open turns in one transaction."""
        run_inline(self.turns.journal(entries))

    def journal_message(self, turn_id: str, message: Message) -> None:
        """Journal a finished message of an open turn."""
        self.journal([JournalMessage(turn_id, message)])

    def journal_partial(self, turn_id: str, slot: int, message: AssistantMessage, *, complete: bool = False) -> None:
        """Journal assistant message ``slot`` of an open turn as it is now, replacing its earlier entry."""
        self.journal([JournalReply(turn_id, slot, message, complete)])

    def journal_partials(self, entries: Sequence[tuple[str, int, AssistantMessage]]) -> None:
        """Several unfinished :meth:`journal_partial` snapshots in one transaction."""
        self.journal([JournalReply(turn_id, slot, message) for turn_id, slot, message in entries])

    def journal_tool_call(
        self,
        turn_id: str,
        call: ToolCall,
        result: ToolResultMessage,
        started_at: int,
        completed_at: int,
        spawned_session_label: str | None = None,
    ) -> None:
        """Journal one finished tool call (the call and its result) of an open turn."""
        self.journal([JournalToolCall(turn_id, call, result, started_at, completed_at, spawned_session_label)])

    def write_turn(
        self,
        turn_id: str | None,
        session_label: str,
        *,
        query_messages: Sequence[Message] = (),
        response_messages: Sequence[Message] = (),
        status: str = "completed",
        usage: Usage | None = None,
        stop_reason: str | None = None,
        error: dict[str, object] | str | None = None,
        compaction: CompactionRecord | None = None,
        tool_calls: Sequence[ToolCallRecord] | None = None,
        turn_type: str | None = None,
        parent_turn_id: Any = HEAD,
        if_head_moved: IfHeadMoved = "raise",
        completed_at: int | None = None,
        source: str | None = None,
        context: dict[str, object] | None = None,
        consumed_queue_items: Sequence[str] = (),
        response_sources: Sequence[str | None] = (),
        **details: Any,
    ) -> str:
        """Write a finished turn (see :class:`TurnWrite`); the keywords not named here are :class:`TurnDetails`."""
        record = TurnWrite(
            session_label, turn_id, query_messages, response_messages, status, usage, stop_reason, error, compaction,
            tool_calls, turn_type, parent_turn_id, if_head_moved, completed_at, source, context, response_sources,
            consumed_queue_items, TurnDetails(**details),
        )  # fmt: skip
        return run_inline(self.turns.write(record))

    def recover(
        self, *, force: bool = False, session: str | None = None, turn_ids: Sequence[str] | None = None
    ) -> list[str]:
        """Close turns left open by dead processes (see ``TurnStore.recover``)."""
        return run_inline(self.turns.recover(force=force, session=session, turn_ids=turn_ids))

    def open_turns(self, session: str | None = None) -> list[Turn]:
        """Turns still open, oldest first; of ``session`` if given."""
        return run_inline(self.turns.open_turns(session))

    def open_turn_owners(self, session: str) -> list[str]:
        """The ``host:pid`` owners of ``session``'s open turns."""
        return [turn.owner or "" for turn in self.open_turns(session)]

    def history(self, session_label: str, *, max_chars: int | None = None) -> list[Message]:
        """The messages to send to the model next (compaction summary first, if any)."""
        return run_inline(self.turns.history(session_label, max_chars=max_chars))

    def history_at(self, turn_id: str, *, max_chars: int | None = None) -> list[Message]:
        """The history as it would be with ``turn_id`` as head."""
        return run_inline(self.turns.history_at(turn_id, max_chars=max_chars))

    def ancestry(self, turn_id: str) -> list[str]:
        """Turn ids from the root to ``turn_id`` inclusive."""
        return run_inline(self.turns.ancestry(turn_id))

    def tree(self, session_label: str, *, limit: int = 5000) -> tuple[list[Turn], bool]:
        """Every closed turn of the tree the session is in, and whether ``limit`` cut it."""
        return run_inline(self.turns.tree(session_label, limit=limit))

    def get_turn(self, turn_id: str) -> Turn:
        """One turn; raises ``TurnNotFound``."""
        return run_inline(self.turns.get(turn_id))

    def children(self, turn_id: str) -> list[Turn]:
        """The direct children of a turn (continuations and forks)."""
        return run_inline(self.turns.children(turn_id))

    def messages(self, turn_id: str) -> list[StoredMessage]:
        """The stored messages of one turn (query first), with ids for UIs."""
        return run_inline(self.turns.messages(turn_id))

    def get_message(self, message_id: int) -> StoredMessage:
        """One message by id; raises ``TurnNotFound``."""
        return run_inline(self.turns.message(message_id))

    def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The tool calls of one turn, with arguments and results."""
        return run_inline(self.turns.tool_calls(turn_id))

    def compaction(self, turn_id: str) -> CompactionRecord | None:
        """The compaction details of a compaction turn (``None`` for a normal turn)."""
        return run_inline(self.turns.compaction(turn_id))

    # ------------------------------------------------------------------ pi files

    def import_pi(self, path: str | Path, label: str | None = None) -> ImportResult:
        """Import a pi-coding-agent session file."""
        return run_inline(self.pi.import_pi(path, label))

    def export_pi(self, session_label: str, path: str | Path) -> Path:
        """Export a session's history as a pi session file."""
        from nexus.ledger.pi_jsonl import export_pi_session

        return export_pi_session(self, session_label, path)  # type: ignore[arg-type]
