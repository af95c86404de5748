"""``LedgerBackend``: the contract every Agents Ledger implementation meets.

SQLite (:class:`nexus.ledger.Ledger`) is the first backend; a PostgreSQL one comes later.
Both must pass the same conformance suite (``tests/ledger/conformance.py``), which only uses
these methods. Engine, broker and server code should type against this Protocol. The
signatures are the SQLite ledger's, verbatim (mypy checks that ``Ledger`` satisfies it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from nexus.ledger._write import HEAD
from nexus.ledger.records import (
    CompactionRecord,
    IfHeadMoved,
    ImportResult,
    QueueItem,
    Session,
    StoredMessage,
    TimelineEntry,
    ToolCallRecord,
    Turn,
)
from nexus.llm.types import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage


@runtime_checkable
class LedgerBackend(Protocol):
    """Sessions as pointers into a tree of turns, written whole, never deleted."""

    def close(self) -> None:
        """Close the database connection."""
        ...

    def create_session(
        self,
        label: str | None = None,
        *,
        origin: str = "user",
        persona_id: str | None = None,
        is_subagent: bool = False,
        parent_session_label: str | None = None,
        parent_turn_id: str | None = None,
        spawn_tool_call_id: str | None = None,
        task_description: str | None = None,
        task_status: str | None = None,
        routing_key: str | None = None,
        origin_session_id: str | None = None,
        head_turn_id: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> Session:
        """Create a session (label defaults to ``session-<ulid>``); raises ``SessionExistsError`` on a taken name."""
        ...

    def get_session(self, label: str) -> Session:
        """The session with exactly this label; raises ``SessionNotFound``."""
        ...

    def resolve_session(self, label_or_alias: str) -> Session:
        """Look a session up by label, then by alias; raises ``SessionNotFound``."""
        ...

    def ensure_session(self, name: str, **create_kwargs: Any) -> Session:
        """Label -> alias -> create: the lookup order the spec gives for incoming messages."""
        ...

    def add_alias(self, alias: str, session_label: str, *, reason: str = "manual") -> None:
        """Make ``alias`` another name of a session (reason: identity_promotion, identity_merge, manual)."""
        ...

    def aliases(self, session_label: str) -> list[str]:
        """The aliases of a session; raises ``SessionNotFound`` for an unknown label."""
        ...

    def list_sessions(
        self,
        *,
        status: str | None = None,
        origin: str | None = None,
        is_subagent: bool | None = None,
        updated_since: int | None = None,
        persona_id: str | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        """Sessions matching all given filters, most recently updated first."""
        ...

    def archive(self, session_label: str) -> None:
        """Mark a session archived (hidden from default lists; nothing is ever deleted)."""
        ...

    def set_task_status(self, session_label: str, task_status: str) -> None:
        """Update a sub-agent session's ``task_status`` (pending, running, completed, failed)."""
        ...

    def open_turn(
        self,
        session_label: str,
        *,
        query_messages: Sequence[Message],
        model: str | None = None,
        provider: str | None = None,
        role: str = "unified",
        run_id: str | None = None,
        parent_turn_id: Any = HEAD,
        source: str | None = None,
        context: dict[str, object] | None = None,
        **fields: Any,
    ) -> str:
        """Start a turn (``status='streaming'``) and store its query; the session pointer does not move."""
        ...

    def journal_message(self, turn_id: str, message: Message) -> None:
        """Journal a finished message (e.g. an assistant response) of an open turn, for crash recovery."""
        ...

    def journal_partial(self, turn_id: str, slot: int, message: AssistantMessage, *, complete: bool = False) -> None:
        """Journal assistant message ``slot`` of an open turn as it is now, replacing its earlier entry."""
        ...

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
        ...

    def write_turn(
        self,
        turn_id: str | None,
        session_label: str,
        *,
        query_messages: Sequence[Message] = (),
        response_messages: Sequence[Message] = (),
        status: str = "completed",
        usage: Usage | None = None,
        model: str | None = None,
        provider: str | None = None,
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
        **fields: Any,
    ) -> str:
        """Write a finished turn in one transaction and move the session pointer to it; returns its id."""
        ...

    def recover(
        self, *, force: bool = False, session: str | None = None, turn_ids: Sequence[str] | None = None
    ) -> list[str]:
        """Close turns left open by dead processes as ``aborted`` with what they journaled (of ``session`` if given)."""
        ...

    def open_turns(self, session: str | None = None) -> list[Turn]:
        """Turns still open (being run, or left by a dead process until :meth:`recover`); of ``session`` if given."""
        ...

    def head(self, session_label: str) -> Turn | None:
        """The session's head turn, or ``None`` for an empty session."""
        ...

    def history(self, session_label: str, *, max_chars: int | None = None) -> list[Message]:
        """The messages to send to the model next (compaction summary first, if any).

        ``max_chars``: only the newest whole turns whose stored bodies hold at least that many characters.
        """
        ...

    def history_at(self, turn_id: str, *, max_chars: int | None = None) -> list[Message]:
        """The history with ``turn_id`` as head (an open turn raises ``TurnStateError``); ``max_chars`` as above."""
        ...

    def ancestry(self, turn_id: str) -> list[str]:
        """Turn ids from the root to ``turn_id`` inclusive."""
        ...

    def turns(self, session_label: str, *, limit: int | None = None) -> list[Turn]:
        """The turns of a session's history, root first; with ``limit``, only the newest ``limit`` of them."""
        ...

    def get_turn(self, turn_id: str) -> Turn:
        """One turn; raises ``TurnNotFound``."""
        ...

    def children(self, turn_id: str) -> list[Turn]:
        """The direct children of a turn (continuations and forks)."""
        ...

    def messages(self, turn_id: str) -> list[StoredMessage]:
        """The stored messages of one turn (query first), with ids for UIs."""
        ...

    def get_message(self, message_id: int) -> StoredMessage:
        """One message by id; raises ``TurnNotFound``."""
        ...

    def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The tool calls of one turn, with arguments and results."""
        ...

    def compaction(self, turn_id: str) -> CompactionRecord | None:
        """The compaction details of a compaction turn (``None`` for a normal turn)."""
        ...

    def fork(self, turn_id: str, label: str | None = None, **create_kwargs: Any) -> Session:
        """A new session (``origin='fork'``) whose head is ``turn_id``; nothing is copied."""
        ...

    def move_pointer(self, session_label: str, turn_id: str | None) -> None:
        """Point a session at any finished turn (or ``None``: empty); the move is logged."""
        ...

    def head_at(self, session_label: str, time_ms: int) -> Turn | None:
        """The head the session had at ``time_ms`` (from its pointer log)."""
        ...

    def timeline(self, session_label: str) -> list[TimelineEntry]:
        """Every pointer move of a session, oldest first."""
        ...

    def sessions_containing(self, turn_id: str) -> list[str]:
        """Labels of the sessions whose current history includes ``turn_id``."""
        ...

    def enqueue(
        self, session_label: str, message: object, *, mode: str, metadata: dict[str, object] | None = None
    ) -> QueueItem:
        """Store a message for a session's queue."""
        ...

    def pending_queue_items(self, session_label: str | None = None) -> list[QueueItem]:
        """Items still queued or processing, oldest first."""
        ...

    def update_queue_item(
        self, item_id: str, status: str, *, turn_id: str | None = None, error: str | None = None
    ) -> QueueItem:
        """Move a queue item on; finished items are final."""
        ...

    def import_pi(self, path: str | Path, label: str | None = None) -> ImportResult:
        """Import a pi-coding-agent session file (see :func:`nexus.ledger.pi_jsonl.import_pi_session`)."""
        ...

    def export_pi(self, session_label: str, path: str | Path) -> Path:
        """Export a session's history as a pi session file (see :func:`nexus.ledger.pi_jsonl.export_pi_session`)."""
        ...


__all__ = ["HEAD", "LedgerBackend"]
