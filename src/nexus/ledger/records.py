"""Plain data returned by (and passed to) the Agents Ledger.

Slotted dataclasses, no ORM: a ``Session`` is a pointer with metadata, a ``Turn`` is one
node of the turn tree, ``StoredMessage`` / ``ToolCallRecord`` / ``CompactionRecord`` are the
rows UIs show. Times are Unix milliseconds everywhere.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.llm.types import Message, TextContent, ToolResultMessage

DEFAULT_SESSION = "main"
"""The session a run uses when none is named (``nexus run``, ``run_agent``)."""

SUMMARY_PREFIX = "[Previous conversation summary]\n"
"""How a compaction summary starts when ``history()`` puts it first (the engine writes the same)."""

TurnStatus: TypeAlias = Literal["pending", "streaming", "completed", "failed", "aborted"]
"""``pending``/``streaming`` = open (journal only, in no history); the other three are closed."""

CLOSED_STATUSES: tuple[str, ...] = ("completed", "failed", "aborted")
OPEN_STATUSES: tuple[str, ...] = ("pending", "streaming")

TurnType: TypeAlias = Literal["normal", "compaction"]
TurnRole: TypeAlias = Literal["manager", "worker", "unified"]
ToolCallStatus: TypeAlias = Literal["pending", "running", "completed", "failed"]
SessionStatus: TypeAlias = Literal["active", "archived"]
IfHeadMoved: TypeAlias = Literal["raise", "branch"]
"""What ``write_turn`` does when the session head is no longer the turn's parent."""


@dataclass(slots=True, frozen=True)
class Session:
    """A named, movable pointer (``thread_id``) at the head turn of a conversation.

    Turns do not belong to sessions; a session *sees* the ancestry of its head, so several
    sessions (forks) share the turns before their fork point.
    """

    label: str
    thread_id: str | None
    persona_id: str
    origin: str
    status: str
    created_at: int
    updated_at: int
    is_subagent: bool = False
    parent_session_label: str | None = None
    parent_turn_id: str | None = None
    spawn_tool_call_id: str | None = None
    task_description: str | None = None
    task_status: str | None = None
    routing_key: str | None = None
    origin_session_id: str | None = None
    metadata: dict[str, object] | None = None

    @property
    def head_turn_id(self) -> str | None:
        """The head turn id (``thread_id`` in the spec's vocabulary)."""
        return self.thread_id


USAGE_ESTIMATED_KEY = "usage_estimated"
"""Turn ``metadata`` key, True when the turn's token counts are chars/4 estimates (no schema column for it)."""


@dataclass(slots=True, frozen=True)
class Turn:
    """One node of the turn tree: a query, the response to it, usage and run metadata.

    ``total_tokens`` is this turn's usage; ``thread_total_tokens`` sums the whole ancestry
    (the spec's ``threads.total_tokens``); ``depth`` is 0 for a root turn.
    """

    id: str
    parent_turn_id: str | None
    session_label: str
    turn_type: str
    status: str
    started_at: int
    completed_at: int | None
    depth: int
    model: str | None = None
    provider: str | None = None
    role: str = "unified"
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    thread_total_tokens: int = 0
    cost: float = 0.0
    query_message_ids: tuple[int, ...] = ()
    response_message_id: int | None = None
    message_count: int = 0
    has_children: bool = False
    tool_call_count: int = 0
    stop_reason: str | None = None
    error: dict[str, object] | None = None
    run_id: str | None = None
    source_event_id: str | None = None
    workspace_path: str | None = None
    toolset_name: str | None = None
    tools_available: list[object] | None = None
    permissions_granted: list[object] | None = None
    permissions_used: list[object] | None = None
    persona_id: str | None = None
    system_prompt_hash: str | None = None
    metadata: dict[str, object] | None = None

    @property
    def is_open(self) -> bool:
        """True while the turn is still being run (or was left open by a dead process)."""
        return self.status in OPEN_STATUSES

    @property
    def usage_estimated(self) -> bool:
        """True when the token counts are estimates (a server reported none); kept in ``metadata``."""
        return bool(self.metadata and self.metadata.get(USAGE_ESTIMATED_KEY) is True)


@dataclass(slots=True)
class ToolCallRecord:
    """One tool invocation of a turn (what ``write_turn`` takes and what lookups return).

    ``write_turn`` derives these from the response messages when it is not given any, so
    callers only build them to add timing, status or ``spawned_session_label``.
    """

    call_id: str
    tool_name: str
    arguments: dict[str, object] = field(default_factory=dict)
    status: str = "completed"
    started_at: int = 0
    completed_at: int | None = None
    error: str | None = None
    spawned_session_label: str | None = None
    turn_id: str = ""
    sequence: int = 0
    message_id: int | None = None
    result_message_id: int | None = None
    result: ToolResultMessage | None = None


@dataclass(slots=True)
class CompactionRecord:
    """The details of a compaction (seed 000 ``CompactionResult``); ``turn_id`` is set when read back.

    History after a compaction is: the summary as a user message, then the messages of the
    turns from ``first_kept_turn_id`` (``None`` = none kept) through the compaction turn,
    then later turns.
    """

    summary: str
    summarized_through_turn_id: str
    first_kept_turn_id: str | None = None
    turns_summarized: int = 0
    compaction_type: str = "summary"
    model: str = ""
    provider: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summary_tokens: int = 0
    summarization_input_tokens: int = 0
    summarization_output_tokens: int = 0
    duration_ms: int = 0
    trigger: str = "context_limit"
    metadata: dict[str, object] | None = None
    turn_id: str = ""


@dataclass(slots=True, frozen=True)
class StoredMessage:
    """A message as stored: its ledger id, turn, position in the turn, and the message itself."""

    id: int
    turn_id: str
    ordinal: int
    role: str
    message: Message
    source: str | None = None
    context: dict[str, object] | None = None
    metadata: dict[str, object] | None = None

    @property
    def text(self) -> str:
        """The message's plain text (text blocks only: no thinking, tool calls or images)."""
        content = self.message.content
        if isinstance(content, str):
            return content
        return "".join(b.text for b in content if isinstance(b, TextContent))


@dataclass(slots=True, frozen=True)
class TimelineEntry:
    """One logged move of a session pointer (``session_history`` row)."""

    session_label: str
    thread_id: str | None
    changed_at: int
    reason: str


@dataclass(slots=True)
class ImportResult:
    """What a pi session import created, and what it kept aside or skipped."""

    session_label: str
    fork_labels: list[str] = field(default_factory=list)
    turns: int = 0
    messages: int = 0
    compactions: int = 0
    kept_entries: dict[str, int] = field(default_factory=dict)
    skipped_entries: dict[str, int] = field(default_factory=dict)


QUEUE_STATUSES: tuple[str, ...] = ("queued", "processing", "delivered", "failed", "dropped")
"""``queued`` -> ``processing`` -> ``delivered`` | ``failed``; ``dropped`` by a queue's drop policy."""


@dataclass(slots=True, frozen=True)
class QueueItem:
    """One durable queue row: a message waiting for (or consumed by) a run of its session."""

    id: str
    session_label: str
    message: object
    mode: str
    status: str
    enqueued_at: int
    started_at: int | None = None
    completed_at: int | None = None
    error: str | None = None
    turn_id: str | None = None
    metadata: dict[str, object] | None = None
