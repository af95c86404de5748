"""Compact a stored session now, outside any run: the engine's compaction on demand.

Automatic compaction happens inside a run, when the prompt nears the context window. A user
may want it earlier (``/compact`` in ``nexus chat``, ``nexus sessions compact``, a broker
command): summarise the older part of the session so the next run starts from the summary.
:func:`compact_session` does that with the engine's own pieces - the same cut rules (a tool
call and its results are never split), the same summary prompt, the same failover stream
(auth profiles, fallbacks) and the same ledger mapping (a ``compaction`` turn plus its
``compactions`` row, trigger ``manual``) - under the session lock, so it never races a run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from nexus._dataclass import dataclass
from nexus.engine.assembly.budget import estimate_tokens, history_window_chars
from nexus.engine.assembly.compaction import compact
from nexus.engine.types import CompactionEndEvent, CompactionStartEvent, EngineEvent

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from nexus.config import ResolvedProfile
    from nexus.engine.execution.cooldowns import ProfileCooldowns
    from nexus.engine.types import EngineLimits
    from nexus.ledger import CompactionRecord, Ledger
    from nexus.llm import AbortSignal, Message, Model, StreamFn

__all__ = ["CompactHost", "CompactionStatus", "SessionCompaction", "compact_session"]


class CompactHost(Protocol):
    """What a manual compaction needs of the process (the ``Runtime``).

    A protocol rather than ``Runtime`` itself, so this module does not import the module that
    calls it (``Runtime.compact``): the import graph stays a tree.
    """

    @property
    def ledger(self) -> Ledger:
        """The session's history, the lock and the compaction turn."""
        ...

    @property
    def limits(self) -> EngineLimits:
        """Reserve and keep-recent token counts, retries."""
        ...

    @property
    def stream_fn(self) -> StreamFn | None:
        """The provider call (None = ``nexus.llm.stream``)."""
        ...

    @property
    def cooldowns(self) -> ProfileCooldowns | None:
        """The auth-profile cooldown table (None = the process-wide one)."""
        ...

    def model(self, ref: str | Model | None = None) -> Model:
        """The model for ``ref`` (None = the configured default)."""
        ...

    def preflight(self, primary: Model) -> None:
        """Refuse a model nothing can reach."""
        ...

    def fallback_models(self, primary: Model) -> list[Model]:
        """The fallback chain without ``primary``."""
        ...

    def auth_profiles(self, models: Sequence[Model]) -> Mapping[str, Sequence[ResolvedProfile]]:
        """Each provider's usable keys, in rotation order."""
        ...


CompactionStatus: TypeAlias = Literal["compacted", "nothing_to_compact", "not_smaller", "aborted"]
"""What a manual compaction did; only ``compacted`` wrote anything."""


@dataclass(slots=True, frozen=True)
class SessionCompaction:
    """The outcome of :func:`compact_session`: whether a compaction turn was written, and why not.

    ``result`` is the compaction's record whenever a summary was made (also for ``not_smaller``, so a
    caller can show the numbers); ``turn_id`` is the compaction turn written (only for ``compacted``);
    ``messages_summarized`` how many messages the summary replaced.
    """

    session_label: str
    status: CompactionStatus
    result: CompactionRecord | None = None
    turn_id: str | None = None
    messages_summarized: int = 0

    @property
    def compacted(self) -> bool:
        """True when the session now starts from a new summary."""
        return self.status == "compacted"

    @property
    def message(self) -> str:
        """One line for a user: what happened, with the token estimate before and after."""
        result = self.result
        count = self.messages_summarized
        messages = f"{count} message{'s' if count != 1 else ''}"
        if self.status == "compacted" and result is not None:
            return (
                f"compacted {messages} into a summary (turn {self.turn_id}): "
                f"~{result.tokens_before} → ~{result.tokens_after} tokens"
            )
        if self.status == "not_smaller" and result is not None:
            return (
                f"not compacted: the summary of {messages} would not make the context "
                f"smaller (~{result.tokens_before} → ~{result.tokens_after} tokens); nothing was changed"
            )
        if self.status == "aborted":
            return "compaction interrupted: nothing was changed"
        return "nothing to compact yet: the conversation is too short"


async def compact_session(
    session_label: str,
    *,
    runtime: CompactHost,
    focus: str | None = None,
    model: str | Model | None = None,
    keep_recent_tokens: int | None = None,
    on_event: Callable[[EngineEvent], None] | None = None,
    signal: AbortSignal | None = None,
    on_wait: Callable[[], object] | None = None,
) -> SessionCompaction:
    """Summarise the older part of ``session_label`` (label or alias) now and record it in the ledger.

    ``model`` summarises (default: the configured default model, as for a run), through the
    configured fallbacks and auth profiles. ``focus`` tells the summariser what to keep.
    ``keep_recent_tokens`` is how much recent conversation stays verbatim; by default the
    engine's ``keep_recent_tokens`` but at most a quarter of the conversation, so a short
    session still has something to summarise. Nothing is written when the summary would not
    make the context smaller. ``on_event`` gets the compaction (and failover) events;
    ``on_wait`` is called if a run of the session holds the lock. Raises ``SessionNotFound``
    for an unknown session, ``CompactionError`` when summarising fails, ``ConfigError`` when
    no model can be called.
    """
    from nexus.engine.execution.session_lock import run_lock

    ledger = runtime.ledger
    label = (await ledger.sessions.resolve(session_label)).label  # SessionNotFound before anything else
    chosen = runtime.model(model)
    runtime.preflight(chosen)
    async with run_lock(ledger, label, signal=signal, on_wait=on_wait) as held:
        if not held:
            return SessionCompaction(label, "aborted")
        return await _compact_locked(runtime, label, chosen, focus, keep_recent_tokens, on_event, signal)


async def _compact_locked(
    runtime: CompactHost,
    label: str,
    model: Model,
    focus: str | None,
    keep_recent_tokens: int | None,
    on_event: Callable[[EngineEvent], None] | None,
    signal: AbortSignal | None,
) -> SessionCompaction:
    """The compaction itself, with the session lock held: history → summary → compaction turn."""
    from nexus.engine.assembly._window import stored_summary
    from nexus.engine.assembly.compaction import CompactionError
    from nexus.engine.execution.failover import failover_stream

    def emit(event: EngineEvent) -> None:
        if on_event is not None:
            on_event(event)

    history = await runtime.ledger.turns.history(label, max_chars=history_window_chars(model))  # what a run loads
    previous = stored_summary(history)
    offset = 0 if previous is None else 1
    messages = history[offset:]
    if not messages:
        return SessionCompaction(label, "nothing_to_compact")
    before = estimate_tokens(history)
    keep = keep_recent_tokens if keep_recent_tokens is not None else _default_keep(runtime, messages)
    chain = [model, *runtime.fallback_models(model)]
    stream_fn = failover_stream(
        chain, runtime.auth_profiles(chain), runtime.limits, emit, inner=runtime.stream_fn, cooldowns=runtime.cooldowns
    )
    emit(CompactionStartEvent("manual", len(messages), before))
    try:
        outcome = await compact(
            messages,
            stream_fn,
            model,
            keep_recent_tokens=keep,
            reserve_tokens=runtime.limits.reserve_tokens,
            trigger="manual",
            previous_summary=previous,
            focus=focus,
            signal=signal,
        )
    except CompactionError as exc:
        emit(CompactionEndEvent(None, exc.error.message))
        if signal is not None and signal.aborted:
            return SessionCompaction(label, "aborted")
        raise
    if outcome is None:
        emit(CompactionEndEvent(None, "nothing old enough to summarise"))
        return SessionCompaction(label, "nothing_to_compact")
    result = outcome.record
    result.tokens_before = before  # the whole context the next run would send, previous summary included
    summarized = outcome.messages_summarized
    if result.tokens_after >= result.tokens_before:  # a summary that does not shrink the context is no gain
        emit(CompactionEndEvent(None, "the summary would not make the context smaller"))
        return SessionCompaction(label, "not_smaller", result, messages_summarized=summarized)
    turn_id = await _write(runtime, label, history, offset + outcome.first_kept_index, result)
    emit(CompactionEndEvent(result, None))
    return SessionCompaction(label, "compacted", result, turn_id, summarized)


def _default_keep(runtime: CompactHost, messages: list[Message]) -> int:
    """The engine's ``keep_recent_tokens``, but at most a quarter of the conversation (at least 1)."""
    return min(runtime.limits.keep_recent_tokens, max(1, estimate_tokens(messages) // 4))


async def _write(runtime: CompactHost, label: str, history: list[Message], cut: int, result: CompactionRecord) -> str:
    """Write the compaction turn and its ``compactions`` row, mapped like a run's own compaction.

    The turn holds no messages; the summariser's tokens are counted in the compaction row
    (``summarization_*_tokens``), not as turn usage, as for a compaction inside a run.
    """
    from nexus.engine.execution.ledger_map import compaction_record, history_turn_ids
    from nexus.ledger import TurnDetails, TurnWrite

    owners = await history_turn_ids(runtime.ledger, label, history)
    record = compaction_record(result, cut=cut, turn_id="", owners=owners)
    turn = TurnWrite(
        label,
        None,
        turn_type="compaction",
        compaction=record,
        stop_reason="end_turn",
        details=TurnDetails(model=result.model, provider=result.provider),
    )
    return await runtime.ledger.turns.write(turn)
