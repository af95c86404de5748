"""Where routing keeps its index and its decisions: two small protocols and their records.

:class:`CheckpointStore` is the index (checkpoint rows, their words, vectors, the indexing
watermark) and :class:`DecisionLog` the A/B record. The SQLite versions live in
:mod:`nexus.routing._sqlite_store` and use the ledger's own file (schema version 13). Searching is done
in memory on every backend (BM25 in :mod:`nexus.routing._lexical`, vectors in
:mod:`nexus.routing._index`), so the stores only keep and load what it needs. Every
method is synchronous and short: the router calls them from worker threads, never from the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Protocol, runtime_checkable

from nexus._dataclass import dataclass


@dataclass(frozen=True, slots=True)
class TurnRow:
    """A closed turn the index has not seen yet, with where it sits in the tree and whose it is."""

    rowid: int
    turn_id: str
    session_label: str
    agent_id: str | None
    parent_turn_id: str | None
    segment_id: int
    position: int
    status: str
    turn_type: str
    has_error: bool
    completed_at: int
    workspace_path: str | None


@dataclass(frozen=True, slots=True)
class FileStamp:
    """A file a turn's tools touched, as the index first saw it: absolute path, size, mtime, content hash,
    and ``name``, the path as the tool was given it (the facet a task's words are matched against)."""

    path: str
    size: int
    mtime_ns: int
    digest: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class NewCheckpoint:
    """One checkpoint to add: its turn, what it is about, its files and (when the embedder worked) its vector."""

    turn: TurnRow
    quality: float
    link: float
    context: str
    ask: str
    reply: str
    files_text: str
    files: tuple[FileStamp, ...]
    vector: bytes | None


@dataclass(frozen=True, slots=True)
class CheckpointMeta:
    """What the in-memory index keeps per checkpoint (the rest is read for the few candidates)."""

    id: int
    agent_id: str | None
    segment_id: int
    position: int
    parent_turn_id: str | None
    turn_id: str
    completed_at: int
    quality: float
    link: float
    vector: bytes | None
    columns: tuple[str, str, str] = ("", "", "")
    """Its words as the lexical stage indexes them: request, reply, file names (stemmed, space-separated)."""


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """Everything stored about one checkpoint, read for the candidates of a decision."""

    id: int
    turn_id: str
    session_label: str
    agent_id: str | None
    segment_id: int
    position: int
    status: str
    quality: float
    completed_at: int
    context: str
    files: tuple[FileStamp, ...]


@dataclass(slots=True)
class DecisionRecord:
    """One routing decision as the ledger keeps it, with its run's outcome once known."""

    id: str
    created_at: int
    task: str
    agent_id: str | None
    conversation_id: str | None
    routing_mode: str
    arm: str
    decision: str  # existing | new | explicit
    turn_id: str | None
    confidence: float
    alternatives: list[str] = field(default_factory=list)
    embedder: str | None = None
    took_ms: float | None = None
    session_label: str | None = None
    message_id: str | None = None
    outcome_status: str | None = None
    outcome_turns: int | None = None
    outcome_tokens: int | None = None
    outcome_cost: float | None = None
    outcome_at: int | None = None
    feedback: int | None = None
    feedback_note: str | None = None


@runtime_checkable
class CheckpointStore(Protocol):
    """The checkpoint index: rows, their words, vectors and the indexing watermark (the search itself is
    in memory, :mod:`nexus.routing._lexical` and :mod:`nexus.routing._index`, the same on every backend)."""

    def pending_turns(self, limit: int) -> list[TurnRow]:
        """Closed turns past the watermark that have no checkpoint yet, oldest first (at most ``limit``)."""
        ...

    def safe_watermark(self, scanned_up_to: int) -> int:
        """The watermark to keep after scanning turns up to ``scanned_up_to``: never past a turn still open."""
        ...

    def known_agents(self) -> list[str]:
        """The ids of the registered (active) agents."""
        ...

    def add(self, checkpoints: Sequence[NewCheckpoint], embedder: str, watermark: int) -> list[int]:
        """Store checkpoints (rows, search text, vectors) and move the watermark, in one transaction."""
        ...

    def refresh_ancestors(self, changes: Sequence[tuple[str, tuple[FileStamp, ...]]], max_steps: int) -> None:
        """A turn rewrote files: its ancestors (from the given parent up, at most ``max_steps``) that touched
        them take the new stamps — a change made by the work that continues them does not make them stale."""
        ...

    def files_of(self, turn_ids: Sequence[str]) -> dict[str, tuple[FileStamp, ...]]:
        """The recorded files of the checkpoints of these turns (those indexed)."""
        ...

    def load(self, embedder: str, after_id: int = 0) -> list[CheckpointMeta]:
        """Every checkpoint with an id above ``after_id``, with its vector by ``embedder`` (or ``None``) and its
        words (:attr:`CheckpointMeta.columns`), in id order."""
        ...

    def without_vector(self, embedder: str, limit: int) -> list[tuple[int, str]]:
        """``(checkpoint id, turn id)`` of checkpoints that have no vector by ``embedder`` yet."""
        ...

    def set_vectors(self, embedder: str, vectors: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors by ``embedder`` for existing checkpoints (replacing others' vectors)."""
        ...

    def rows(self, ids: Sequence[int]) -> list[CheckpointRow]:
        """The stored rows of these checkpoints (in no particular order)."""
        ...

    def clear(self) -> None:
        """Forget every checkpoint, search row, vector and the watermark (decisions stay)."""
        ...

    def count(self) -> int:
        """How many checkpoints are indexed."""
        ...


@runtime_checkable
class DecisionLog(Protocol):
    """Every routing decision, its run's outcome and explicit feedback (for ``nexus route stats``)."""

    def record(self, decision: DecisionRecord) -> None:
        """Store a new decision."""
        ...

    def attach(self, decision_id: str, session_label: str, message_id: str) -> None:
        """Say where the routed message went (its session and message id), so its outcome can be found."""
        ...

    def settle(self) -> int:
        """Fill the outcome of decisions whose message has been run (or failed); returns how many."""
        ...

    def feedback(self, decision_id: str, score: int, note: str | None = None) -> None:
        """Record a user's verdict on a decision (+1 good, -1 bad); unknown ids raise ``RoutingError``."""
        ...

    def decisions(self, since_ms: int = 0) -> list[DecisionRecord]:
        """Decisions made at or after ``since_ms``, oldest first."""
        ...


@runtime_checkable
class RouteStore(CheckpointStore, DecisionLog, Protocol):
    """Both, as each backend's store is (one object, one connection or pool)."""

    def close(self) -> None:
        """Release the store's own connection (the ledger stays open)."""
        ...
