"""Plain data returned by (and passed to) the Agents Ledger.

Slotted dataclasses, no ORM: a ``Session`` is a pointer with metadata, a ``Turn`` is one
node of the turn tree, ``StoredMessage`` / ``ToolCallRecord`` / ``CompactionRecord`` are the
rows UIs show. Times are Unix milliseconds everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any, Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.llm import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, Usage

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
    owner: str | None = None
    """``host:pid`` of the process running an open turn (set by ``open_turns``; ``None`` once it is closed)."""

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
    """The details of a compaction (seed 000's ``CompactionResult``: the engine makes it, without turn ids,
    and its run fills them in); ``turn_id`` is set when read back.

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

    def unknown_entries(self) -> dict[str, int]:
        """Kept entries of a type pi's session format does not define (a newer pi, another tool, a typo): stored
        with their turn and exported back as they came, but nothing here reads them, so an importer says so."""
        return {kind: count for kind, count in self.kept_entries.items() if kind not in PI_ENTRY_TYPES}


PI_ENTRY_TYPES = frozenset({
    "message", "model_change", "thinking_level_change", "compaction", "branch_summary", "custom", "custom_message",
    "label", "session_info",
})  # fmt: skip
"""The entry types of pi's session format (version 3) after its header."""


QUEUE_STATUSES: tuple[str, ...] = ("queued", "processing", "delivered", "failed", "dropped")
"""``queued`` -> ``processing`` -> ``delivered`` | ``failed``; ``dropped`` by a queue's drop policy."""

Settlement: TypeAlias = Literal["delivered", "failed", "dropped"]
"""How a queue item ends (:meth:`~nexus.ledger.protocols.QueueStore.settle`); a finished item is never run again."""


class _Head:
    """Sentinel: "build on the session's current head"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "HEAD"


HEAD: Any = _Head()
"""Default ``parent_turn_id`` of :class:`TurnOpen` / :class:`TurnWrite`: the session head, read inside the write."""


@dataclass(slots=True)
class TurnDetails:
    """Descriptive fields of a turn, set when it is opened or written (``None`` = leave as it is)."""

    model: str | None = None
    provider: str | None = None
    role: str | None = None
    run_id: str | None = None
    toolset_name: str | None = None
    tools_available: list[object] | None = None
    permissions_granted: list[object] | None = None
    permissions_used: list[object] | None = None
    source_event_id: str | None = None
    workspace_path: str | None = None
    persona_id: str | None = None
    system_prompt_hash: str | None = None
    metadata: dict[str, object] | None = None
    started_at: int | None = None


@dataclass(slots=True)
class TurnOpen:
    """What :meth:`~nexus.ledger.protocols.TurnStore.open` stores: a ``streaming`` turn and its query.

    ``parent_turn_id`` defaults to the session head; an explicit one that is no longer the head
    raises ``HeadMovedError``. ``system_prompt`` is stored once by its hash; ``source`` and
    ``context`` (assembly metadata) go on the query messages. ``consumed_queue_items`` and
    ``lease_fence``: as :class:`TurnWrite`'s, they fence the open (``LeaseLostError``, nothing stored).
    """

    session_label: str
    query_messages: Sequence[Message]
    details: TurnDetails = field(default_factory=TurnDetails)
    parent_turn_id: Any = HEAD
    source: str | None = None
    context: dict[str, object] | None = None
    system_prompt: str | None = None
    consumed_queue_items: Sequence[str] = ()
    lease_fence: bool = True


@dataclass(slots=True)
class TurnWrite:
    """Everything one turn write carries (:meth:`~nexus.ledger.protocols.TurnStore.write`, one transaction).

    ``turn_id`` is the id :meth:`TurnStore.open` returned (then only the response is given) or ``None``
    for a turn written in one go with its ``query_messages``. ``usage`` defaults to the sum over the
    response's assistant messages; tool-call rows are derived from the response (``tool_calls`` adds
    timings or ``spawned_session_label``). ``response_sources[i]`` is the ``source`` of response message
    ``i`` when it is a user message (a steer). ``consumed_queue_items`` are queue items the turn consumed:
    marked ``delivered`` in the same transaction (items already finished are left alone: a turn is never
    refused over its queue bookkeeping). When the head is no longer the parent, ``if_head_moved="raise"``
    raises ``HeadMovedError`` and ``"branch"`` keeps the turn as a side branch without moving the pointer.
    ``lease``: the session lease the run holds; the write is refused (``LeaseLostError``) unless it is still
    valid. Without one, consumed items that a lease claimed fence the write all the same, per process
    (docs/scaling.md). ``lease_fence=False``: the writer claimed the consumed items itself without a lease
    (a broker with leases off), so that check (a read per turn) is skipped; such a claim is never taken
    over while its process lives (a leased claim only takes items of an ended process, or older epochs).
    """

    session_label: str
    turn_id: str | None = None
    query_messages: Sequence[Message] = ()
    response_messages: Sequence[Message] = ()
    status: str = "completed"
    usage: Usage | None = None
    stop_reason: str | None = None
    error: dict[str, object] | str | None = None
    compaction: CompactionRecord | None = None
    tool_calls: Sequence[ToolCallRecord] | None = None
    turn_type: str | None = None
    parent_turn_id: Any = HEAD
    if_head_moved: IfHeadMoved = "raise"
    completed_at: int | None = None
    source: str | None = None
    context: dict[str, object] | None = None
    response_sources: Sequence[str | None] = ()
    consumed_queue_items: Sequence[str] = ()
    details: TurnDetails = field(default_factory=TurnDetails)
    lease: Lease | None = None
    lease_fence: bool = True


@dataclass(slots=True, frozen=True)
class JournalMessage:
    """A finished message of an open turn (a steer that joined the run), for crash recovery."""

    turn_id: str
    message: Message


@dataclass(slots=True, frozen=True)
class JournalReply:
    """Assistant message ``slot`` (0, 1, ... within the turn) of an open turn as it is now.

    Replaces the slot's earlier entry, which keeps its place; ``complete=False`` while it streams
    (recovered as ``stop_reason="aborted"``), ``True`` once it ended.
    """

    turn_id: str
    slot: int
    message: AssistantMessage
    complete: bool = False


@dataclass(slots=True, frozen=True)
class JournalToolCall:
    """One finished tool call of an open turn, with its result."""

    turn_id: str
    call: ToolCall
    result: ToolResultMessage
    started_at: int
    completed_at: int
    spawned_session_label: str | None = None


JournalEntry: TypeAlias = JournalMessage | JournalReply | JournalToolCall


@dataclass(slots=True)
class NewSession:
    """Everything :meth:`~nexus.ledger.protocols.SessionStore.create` stores about a new session.

    ``label=None`` makes one up (``session-<ulid>``, or ``fork-<ulid>`` for ``origin="fork"``). A fork is a
    new session whose ``head_turn_id`` is any finished turn: nothing is copied; it inherits the persona.
    """

    label: str | None = None
    origin: str = "user"
    persona_id: str | None = None
    is_subagent: bool = False
    parent_session_label: str | None = None
    parent_turn_id: str | None = None
    spawn_tool_call_id: str | None = None
    task_description: str | None = None
    task_status: str | None = None
    routing_key: str | None = None
    origin_session_id: str | None = None
    head_turn_id: str | None = None
    metadata: dict[str, object] | None = None


@dataclass(slots=True, frozen=True)
class SessionQuery:
    """Filters of :meth:`~nexus.ledger.protocols.SessionStore.list` (every one given must match)."""

    status: str | None = None
    origin: str | None = None
    is_subagent: bool | None = None
    updated_since: int | None = None
    persona_id: str | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """A session's lease: who may run it until when, and its epoch, the fencing token its writes carry.

    ``epoch`` grows by one at every new tenure (never reused), so a write stamped with an older epoch is
    refused once someone else took the session over (docs/scaling.md). ``holder`` is ``None`` for a
    released lease. Times are the database's clock, Unix ms. ``prior_holder`` names the holder whose
    lease had expired when this one was acquired (a takeover: that run may have left an open turn).
    """

    session_label: str
    holder: str | None
    epoch: int
    expires_at: int
    acquired_at: int
    prior_holder: str | None = None


@dataclass(frozen=True, slots=True)
class QueueItem:
    """One durable queue row: a message waiting for (or consumed by) a run of its agent's session."""

    id: str
    session_label: str
    agent_id: str | None
    message_id: str | None
    sender: str | None
    message: Any
    mode: str
    status: str
    attempts: int
    enqueued_at: int
    started_at: int | None
    completed_at: int | None
    error: str | None
    turn_id: str | None

    @property
    def content(self) -> str:
        """The message's text (the ``content`` of a stored ``AgentMessage``)."""
        message = self.message
        return str(message.get("content", "")) if isinstance(message, dict) else str(message)

    def to_json(self) -> dict[str, Any]:
        """The item as the CLI (``--json``) and the HTTP API show it. A refused message's row has its id column
        freed for the sender's retry (``settle(refused=True)``); it still shows the id its stored message has."""
        stored = self.message if isinstance(self.message, dict) else {}
        return {
            "id": self.id,
            "agent": self.agent_id,
            "session": self.session_label,
            "session_key": stored.get("session"),
            "message_id": self.message_id if self.message_id is not None else stored.get("id"),
            "from": self.sender,
            "mode": self.mode,
            "status": self.status,
            "attempts": self.attempts,
            "enqueued_at": self.enqueued_at,
            "error": self.error,
            "turn_id": self.turn_id,
            "content": self.content,
        }


@dataclass(frozen=True, slots=True)
class AcceptRequest:
    """One message to accept (:meth:`~nexus.ledger.protocols.QueueStore.accept`)."""

    agent_id: str
    session_label: str
    message_id: str
    sender: str | None
    message: Any
    mode: str
    log_as_agent_message: bool = False
    session_key: str | None = None
    """Set for a message to one of the agent's per-sender sessions: the session row is created
    (``routing_key`` = this key) in the same transaction when it does not exist yet."""
