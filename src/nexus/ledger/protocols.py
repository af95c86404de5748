"""The storage contracts of the Agents Ledger: small async protocols, one per job, typed with records.

A backend implements them and proves it with the conformance suite (``nexus.testing.conformance``):
the required protocols are what the engine and the broker need to run; the optional ones serve UIs
and tools, and the suite runs their tests only for a backend that has them. The ``Ledger`` is the
composition of one of each (``nexus.ledger.Ledger``).

Every method is ``async``: the PostgreSQL backend waits on the network there, and a wait must never
hold the event loop that every run of a process shares. The SQLite backend answers inline (its calls
are short, and never suspend).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from nexus.ledger._agent_registry import AgentRow
from nexus.ledger._queue_reads import Arriving, Held
from nexus.ledger.deliveries import DeliveryRecord
from nexus.ledger.records import (
    AcceptRequest,
    CompactionRecord,
    ImportResult,
    JournalEntry,
    Lease,
    NewSession,
    QueueItem,
    Session,
    SessionQuery,
    Settlement,
    StoredMessage,
    TimelineEntry,
    ToolCallRecord,
    Turn,
    TurnOpen,
    TurnWrite,
)
from nexus.llm import Message


@runtime_checkable
class TurnStore(Protocol):
    """Required. The turn tree: open a turn, journal it, write it whole, recover it; read histories."""

    async def open(self, turn: TurnOpen) -> str:
        """Store a ``streaming`` turn and its query (the pointer does not move); returns its id."""
        ...

    async def journal(self, entries: Sequence[JournalEntry]) -> None:
        """Crash-journal entries of open turns, in one transaction (best effort: a short wait for a busy store)."""
        ...

    async def write(self, turn: TurnWrite) -> str:
        """Write a finished turn in one transaction and move the session pointer to it; returns its id."""
        ...

    async def recover(
        self, *, force: bool = False, session: str | None = None, turn_ids: Sequence[str] | None = None
    ) -> list[str]:
        """Close turns left open by dead processes as ``aborted`` with what they journaled; returns their ids."""
        ...

    async def open_turns(self, session: str | None = None) -> list[Turn]:
        """Turns still open (being run, or left by a dead process), oldest first; of ``session`` if given."""
        ...

    async def get(self, turn_id: str) -> Turn:
        """One turn; ``TurnNotFound`` for an unknown id."""
        ...

    async def history(self, session_label: str, *, max_chars: int | None = None) -> list[Message]:
        """The messages to send the model next (compaction summary first); ``max_chars`` bounds it to a window."""
        ...

    async def head_history(
        self, session_label: str, *, max_chars: int | None = None
    ) -> tuple[str, str | None, list[Message]]:
        """The session's exact label (an alias resolves), its head turn id and :meth:`history`, from one read
        (``SessionNotFound`` for neither a label nor an alias)."""
        ...

    async def history_at(self, turn_id: str, *, max_chars: int | None = None) -> list[Message]:
        """The history with ``turn_id`` as head (an open turn raises ``TurnStateError``)."""
        ...

    async def path(self, session_label: str, *, limit: int | None = None) -> list[Turn]:
        """The turns of a session's history, root first; with ``limit`` only the newest ``limit``."""
        ...

    async def messages(self, turn_id: str) -> list[StoredMessage]:
        """The stored messages of one turn (query first), with ids."""
        ...

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The tool calls of one turn, with arguments and results."""
        ...

    async def compaction(self, turn_id: str) -> CompactionRecord | None:
        """The compaction details of a compaction turn (``None`` for a normal turn)."""
        ...


@runtime_checkable
class TurnTree(Protocol):
    """Optional. Tree questions for UIs and audits."""

    async def ancestry(self, turn_id: str) -> list[str]:
        """Turn ids from the root to ``turn_id`` inclusive."""
        ...

    async def children(self, turn_id: str) -> list[Turn]:
        """The direct children of a turn (continuations and forks)."""
        ...

    async def tree(self, session_label: str, *, limit: int = 5000) -> tuple[list[Turn], bool]:
        """Every closed turn of the tree the session is in, oldest first, and whether ``limit`` cut it."""
        ...

    async def message(self, message_id: int) -> StoredMessage:
        """One stored message by id; ``TurnNotFound`` for an unknown id."""
        ...

    async def system_prompt(self, prompt_hash: str) -> str | None:
        """The system prompt a turn was sent, by its ``system_prompt_hash``."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Required. Sessions: named, movable pointers into the turn tree, with aliases; forks are new pointers."""

    async def create(self, session: NewSession) -> Session:
        """Create a session (a fork: ``origin="fork"`` with a ``head_turn_id``); ``SessionExistsError`` if taken."""
        ...

    async def get(self, label: str) -> Session:
        """The session with exactly this label; ``SessionNotFound``."""
        ...

    async def resolve(self, label_or_alias: str) -> Session:
        """Look a session up by label, then by alias; ``SessionNotFound``."""
        ...

    async def ensure(self, session: NewSession) -> Session:
        """Label -> alias -> create (``session.label`` is the name looked up)."""
        ...

    async def list(self, query: SessionQuery = SessionQuery()) -> builtins.list[Session]:
        """Sessions matching every filter of ``query``, most recently updated first."""
        ...

    async def update(
        self,
        label: str,
        *,
        status: str | None = None,
        task_status: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        """Set a session's ``status`` (``archived``: nothing is deleted) or ``task_status``; merge ``metadata``
        into its metadata (a key given ``None`` is removed), e.g. a display ``title``. The label never changes."""
        ...

    async def add_alias(self, alias: str, session_label: str, *, reason: str = "manual") -> None:
        """Make ``alias`` another name of a session."""
        ...

    async def aliases(self, session_label: str) -> builtins.list[str]:
        """The aliases of a session, oldest first."""
        ...

    async def head(self, session_label: str) -> Turn | None:
        """The session's head turn, or ``None`` for an empty session."""
        ...

    async def move_pointer(self, session_label: str, turn_id: str | None) -> None:
        """Point a session at any finished turn (or ``None``); the move is logged."""
        ...


@runtime_checkable
class PointerLog(Protocol):
    """Optional. The log of pointer moves: the head at a time, every move, which sessions include a turn."""

    async def timeline(self, session_label: str) -> list[TimelineEntry]:
        """Every pointer move of a session, oldest first."""
        ...

    async def head_at(self, session_label: str, time_ms: int) -> Turn | None:
        """The head the session had at ``time_ms``."""
        ...

    async def containing(self, turn_id: str) -> list[str]:
        """Labels of the sessions whose current history includes ``turn_id``."""
        ...


@runtime_checkable
class QueueStore(Protocol):
    """Required. The broker's durable queue: accept (idempotent by message id), claim, settle.

    An item goes ``queued`` -> ``processing`` (claimed: one more attempt) -> ``delivered`` | ``failed`` |
    ``dropped`` (settled, final), or back to ``queued`` (released unconsumed: the attempt taken back).
    A turn that consumed items delivers them in its own transaction (``TurnWrite.consumed_queue_items``).
    """

    def accept(self, request: AcceptRequest) -> Awaitable[tuple[QueueItem, bool]]:
        """Queue a message durably; ``(item, created)``, ``created`` False for a message id already accepted.

        An awaitable (a coroutine, or the future of a group commit): it runs for every message."""
        ...

    def claim(
        self, item_ids: Sequence[str], *, lease: Lease | None = None, overflow_of: str | None = None
    ) -> Awaitable[list[tuple[QueueItem, int]] | None]:
        """A run takes these items: ``processing``, one more attempt; ``QueueItemsFinishedError`` for finished ones.

        With the session's ``lease`` (a backend with a ``LeaseStore``): refused with ``LeaseLostError`` unless the
        lease is valid; the items are stamped with its epoch, and an item a run of an older epoch held is taken over.
        With ``overflow_of`` (the items' session label): the claim also does :meth:`take_overflow` for the items, in
        its own transaction, and returns what it took (a broker that may owe a summary asks for it this way: no
        read of its own before each such batch); without it, ``None``.
        """
        ...

    async def release(self, item_ids: Sequence[str], *, lease: Lease | None = None) -> None:
        """Items handed back unconsumed: ``queued`` again, the claim's attempt taken back (fenced by ``lease``)."""
        ...

    async def settle(
        self,
        item_ids: Sequence[str],
        outcome: Settlement,
        *,
        turn_id: str | None = None,
        reason: str | None = None,
        lease: Lease | None = None,
        overflow_cap: int | None = None,
        refused: bool = False,
    ) -> None:
        """Finish unfinished items: ``delivered`` (by ``turn_id``), ``failed`` or ``dropped`` (with ``reason``).

        With ``lease``: refused with ``LeaseLostError``, nothing moved, unless the lease is still valid. Dropped with
        ``overflow_cap`` (the ``summarize`` policy): owed to the session's next summary (:meth:`take_overflow`).
        Dropped ``refused`` (the sender was told its message was not queued): the row stays, its message id is
        freed, so a retry with that id is a new message, not a duplicate of the refusal.
        """
        ...

    async def take_overflow(
        self, session_label: str, batch: Sequence[str], *, lease: Lease | None = None
    ) -> list[tuple[QueueItem, int]]:
        """The items dropped with an ``overflow_cap`` that a turn of the messages ``batch`` owes a ``[Queue overflow]``
        summary of, oldest first, each with its cap: not taken yet, or taken by a turn of one of these messages
        (its retry). From then on carried by ``batch[0]``: once it is finished they are told, never given again,
        whichever process runs the session's turns (fenced by ``lease``)."""
        ...

    async def fail_exhausted(self, max_attempts: int) -> list[QueueItem]:
        """Fail every ``processing`` item already tried ``max_attempts`` times (crashes cut its runs)."""
        ...

    async def get(self, item_id: str) -> QueueItem | None:
        """One item by id, or ``None``."""
        ...

    async def get_many(self, item_ids: Sequence[str]) -> list[QueueItem | None]:
        """The items of ``item_ids`` in that order, ``None`` for an unknown id, read together (one snapshot)."""
        ...

    async def pending(self, agent_id: str | None = None, *, session_label: str | None = None) -> list[QueueItem]:
        """Items ``queued`` or ``processing`` (of one agent or session, or all), in arrival order: what a start
        reloads, and a broker taking over a dead one's session."""
        ...

    async def items(self, *, agent_id: str | None = None, statuses: Sequence[str] = ()) -> list[QueueItem]:
        """Items filtered by agent and status (all statuses when empty), oldest first."""
        ...

    async def unanswered_replies(self) -> list[tuple[QueueItem, str]]:
        """Finished asks (``metadata.reply_to``) whose reply was never queued, each with the agent to answer."""
        ...


@runtime_checkable
class QueueFeed(Protocol):
    """Optional. Rows other processes accepted, for a broker that shares its store with writers elsewhere."""

    async def cursor(self) -> int:
        """Where :meth:`queued_after` starts: the newest row's position (0 for none)."""
        ...

    async def queued_after(
        self, cursor: int, held: Held | None = None, arriving: Arriving | None = None
    ) -> tuple[list[QueueItem], int]:
        """Items still ``queued`` accepted after ``cursor`` (whole rows only of those neither ``held`` nor
        ``arriving``); the new cursor, kept before the first ``arriving`` row (a row the caller is queueing
        itself is looked at again next time: if its sender stopped before holding it, it is returned then)."""
        ...


@runtime_checkable
class LeaseStore(Protocol):
    """Optional. One run per session across processes: a lease row per session, its epoch a fencing token.

    A lease is valid until ``expires_at`` (the database's clock); every new tenure bumps the epoch, and a
    queue write made under a lease (``QueueStore.claim``/``release``/``settle`` with ``lease=``) or the turn
    consuming its items is refused with ``LeaseLostError`` once the lease expired or was taken over.
    Backends without it run one broker per database (docs/scaling.md).
    """

    async def acquire(self, session_label: str, holder: str, ttl_ms: int) -> Lease | None:
        """Take the session's lease (epoch + 1) or renew the caller's valid one; ``None`` while another holds it."""
        ...

    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        """Extend a valid lease by ``ttl_ms`` from now; ``LeaseLostError`` once it expired or was taken over."""
        ...

    async def release(self, lease: Lease) -> bool:
        """Give the lease up (its epoch stays); ``False`` when it was no longer the caller's."""
        ...

    async def get(self, session_label: str) -> Lease | None:
        """The session's lease as stored (``holder`` ``None``: released), ``None`` if it never had one."""
        ...

    async def expired(self, limit: int = 100) -> list[Lease]:
        """Leases that expired while held (their holder died or stopped renewing), oldest first."""
        ...


@runtime_checkable
class QueueListener(Protocol):
    """Optional. Wake-ups: a call per notification that a session became ready (PostgreSQL's LISTEN/NOTIFY).

    Never the only way a broker finds work (it polls too): a notification may be lost while listening
    reconnects, so each (re)connection calls ``on_wake("")`` once.
    """

    async def listen(self, on_wake: Callable[[str], None]) -> None:
        """Call ``on_wake(session_label)`` (``""``: look at the whole queue) per notification, until cancelled."""
        ...


@runtime_checkable
class AgentStore(Protocol):
    """Optional. The broker's agent registry: who is registered, with which role, session and spec.

    A registered agent always points at an existing session (created with it), and no two active
    agents share one (``AgentSessionTakenError``): they would run into one history.
    """

    async def save(self, agent_id: str, *, role: str, session_label: str, spec: dict[str, Any]) -> AgentRow:
        """Create or update an agent with exactly these values (a removed one comes back)."""
        ...

    async def add(
        self, agent_id: str, *, role: str | None = None, session_label: str | None = None, spec: dict[str, Any]
    ) -> AgentRow:
        """Register an agent, or update the active one keeping what is left out (``None``, absent spec keys)."""
        ...

    async def get(self, agent_id: str) -> AgentRow | None:
        """The active agent with this id, or ``None``."""
        ...

    async def list(self) -> builtins.list[AgentRow]:
        """Every active agent, by id."""
        ...

    async def remove(self, agent_id: str) -> bool:
        """Mark an agent removed (its session stays); False if it was not registered."""
        ...


@runtime_checkable
class DeliveryStore(Protocol):
    """Optional. Where each reply went: one record per delivery of a run to an adapter target."""

    async def record(self, delivery: DeliveryRecord) -> DeliveryRecord:
        """Store one finished delivery; returns it with its id."""
        ...

    async def for_turns(self, turn_ids: Sequence[str]) -> dict[str, list[DeliveryRecord]]:
        """The deliveries of each turn (oldest first); turns without any are left out."""
        ...

    async def recent(self, *, session_label: str | None = None, limit: int = 50) -> list[DeliveryRecord]:
        """The latest deliveries (of one session, or of all), newest first."""
        ...


@runtime_checkable
class PiFiles(Protocol):
    """Optional. pi-coding-agent session files in and out."""

    async def import_pi(self, path: str | Path, label: str | None = None) -> ImportResult:
        """Import a pi session file in one transaction (``PiFormatError`` names the line; nothing imported)."""
        ...

    async def export_pi(self, session_label: str) -> str:
        """A session's history as the text of a pi session file."""
        ...


__all__ = [
    "AgentStore",
    "DeliveryStore",
    "LeaseStore",
    "PiFiles",
    "PointerLog",
    "QueueFeed",
    "QueueListener",
    "QueueStore",
    "SessionStore",
    "TurnStore",
    "TurnTree",
]
