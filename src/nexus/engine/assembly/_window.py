"""What the model sees of a run's conversation: summary + kept messages, repaired and truncated.

The run keeps the whole conversation (history + this turn) untouched, because that is what
the ledger stores. Compaction only moves a cut: the model is sent the summary, then the
messages from the cut on. Every payload is repaired (a tool call and its result are one
unit) and tool results are capped, right before each model call, on a copy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import field

from nexus._dataclass import dataclass
from nexus.engine.assembly._sessions import EstimateEntry, PrefixKey, SessionCache
from nexus.engine.assembly.budget import estimate_message_tokens, estimate_tokens, reported_usage, should_compact
from nexus.engine.assembly.compaction import (
    CompactionError,
    compact,
    overflow_error,
    plan_compaction,
    summary_message,
    truncate_tool_results,
)
from nexus.engine.assembly.repair import repair_transcript
from nexus.engine.types import (
    AgentError,
    CompactionEndEvent,
    CompactionStartEvent,
    CompactionTrigger,
    EngineEvent,
    EngineLimits,
    TokenBudget,
)
from nexus.ledger import SUMMARY_PREFIX, CompactionRecord
from nexus.llm import AbortSignal, AssistantMessage, Message, Model, StreamFn, ToolResultMessage, UserMessage

log = logging.getLogger("nexus.engine")


def _same(a: object, b: object) -> bool:
    """The same message, or an equal one (the ledger decodes a turn's own messages anew the next time)."""
    return a is b or a == b


def history_estimates(history: list[Message], cache: SessionCache | None = None) -> tuple[int, list[int | None]]:
    """:func:`~nexus.engine.assembly.budget.context_estimates` of a history, O(new messages) for a known session.

    The ledger gives the next turn of a session the same message objects plus the newest turn, so
    the estimates the session's ``cache`` holds for a prefix of this history (``==``, identity
    first) are reused and only the messages after it are estimated. Without a cache, all are.
    """
    known: list[int] = []
    last, reported = -1, 0
    entry = cache.estimates if cache is not None else None
    if entry is not None:
        src = entry.messages
        if 0 < len(src) <= len(history) and _same(src[0], history[0]) and src == history[: len(src)]:
            known, last, reported = entry.values, entry.last, entry.reported
    start = len(known)
    values = known + [estimate_message_tokens(m) for m in history[start:]]
    for index in range(len(history) - 1, start - 1, -1):
        usage = reported_usage(history[index])
        if usage > 0:
            last, reported = index, usage
            break
    if not history:
        return 0, []
    if cache is not None:
        cache.estimates = EstimateEntry(list(history), values, last, reported)  # a copy: the caller may change its list
        cache.changed()
    estimates: list[int | None] = [None] * (last + 1)
    estimates.extend(values[last + 1 :])
    return reported + sum(values[last + 1 :]), estimates


def stored_summary(history: Sequence[Message]) -> str | None:
    """The compaction summary the ledger put first in ``history``, if there is one."""
    if not history:
        return None
    first = history[0]
    if isinstance(first, UserMessage) and isinstance(first.content, str) and first.content.startswith(SUMMARY_PREFIX):
        return first.content[len(SUMMARY_PREFIX) :]
    return None


@dataclass(slots=True)
class ContextWindow:
    """The compaction state of one run and the three overflow-recovery levels.

    ``cut`` indexes the conversation list: messages before it are represented by
    ``summary``. ``compacted_len`` is the conversation length at the last compaction, so the
    token estimate does not trust usage reported before it.
    """

    model: Model
    stream_fn: StreamFn
    limits: EngineLimits
    base_budget: TokenBudget
    emit: Callable[[EngineEvent], None]
    summary: str | None = None
    cut: int = 0
    truncate_chars: int | None = None
    level: int = 0
    compaction: CompactionRecord | None = None
    compactions: list[tuple[CompactionRecord, int]] = field(default_factory=list)
    """Every compaction of the run with the cut it made (the conversation index kept from)."""
    cache: SessionCache | None = field(default=None, repr=False)
    """The session's cache (owned by the runtime): the repaired prefix is kept there for the next run."""
    compacted_len: int | None = None
    failure: AgentError | None = None
    proactive_tried_at: int = -1
    compacting: bool = False
    _seen: list[Message] = field(default_factory=list, repr=False)
    _estimates: list[int | None] = field(default_factory=list, repr=False)
    _usage_free: int = field(default=0, repr=False)
    _pay_key: PrefixKey | None = field(default=None, repr=False)
    _pay_src: list[Message] = field(default_factory=list, repr=False)
    _pay_out: list[Message] = field(default_factory=list, repr=False)

    @classmethod
    def for_history(
        cls,
        history: Sequence[Message],
        *,
        model: Model,
        stream_fn: StreamFn,
        limits: EngineLimits,
        budget: TokenBudget,
        emit: Callable[[EngineEvent], None],
        estimates: Sequence[int | None] | None = None,
        cache: SessionCache | None = None,
    ) -> ContextWindow:
        """Start from the ledger's history (its leading summary message becomes ``summary``).

        ``estimates`` are the per-message token estimates assembly made for exactly ``history``
        (``AssembledContext.history_estimates``), reused instead of estimating again: the window takes that list
        and extends it as the conversation grows (a copy of it was one more list as long as the history, per run).
        """
        summary = stored_summary(history)
        window = cls(model, stream_fn, limits, budget, emit, summary=summary, cut=1 if summary is not None else 0)
        window.cache = cache
        if estimates is not None and len(estimates) == len(history):
            window._seen = list(history)
            window._estimates = estimates if type(estimates) is list else list(estimates)
            if None not in window._estimates:  # assembly estimated all: no message reports usage
                window._usage_free = len(history)
        return window

    def _remember_prefix(self, key: PrefixKey, src: list[Message], out: list[Message]) -> None:
        """Keep ``src`` -> ``out`` in the session's cache for its next run."""
        if src and self.cache is not None:
            self.cache.prefix = (key, src, out)
            self.cache.changed()

    # ------------------------------------------------------------------ views

    def view(self, messages: Sequence[Message]) -> list[Message]:
        """Summary message (if any) + the messages from the cut on, before repair."""
        kept = list(messages[self.cut :])
        if self.summary is None:
            return kept
        return [summary_message(self.summary), *kept]

    def payload(self, messages: Sequence[Message]) -> list[Message]:
        """What is sent to the model: the view, level-2 truncated if needed, repaired, results capped.

        Repair works per region (an assistant message and what follows it up to the next one), so
        everything before the last assistant message repairs the same way on every call: that
        prefix is kept (for this run, and per process for the next turn of the session, whose
        history the ledger hands out as the same objects) and only the newest region is repaired
        again. A kept prefix is used only while its messages are the same (``==`` on the lists,
        which checks identity first), so a change anywhere is repaired from scratch.
        """
        start = self.cut
        boundary = start
        for index in range(len(messages) - 1, start - 1, -1):
            if isinstance(messages[index], AssistantMessage):
                boundary = index
                break
        key = (self.cut, self.summary, self.truncate_chars, self.limits.max_tool_result_chars)
        head, src = self._cached_prefix(messages, boundary, key)
        done = start + len(src)
        if boundary > done:  # regions completed since the last call join the kept prefix
            head = head + self._process(messages[done:boundary])
            src = src + list(messages[done:boundary])
            done = boundary
            self._remember_prefix(key, src, head)
        self._pay_key, self._pay_src, self._pay_out = key, src, head
        return head + self._process(messages[done:])

    def _cached_prefix(
        self, messages: Sequence[Message], boundary: int, key: PrefixKey
    ) -> tuple[list[Message], list[Message]]:
        """(processed output, source messages) of the longest usable kept prefix; the summary alone on a miss."""
        start = self.cut
        room = boundary - start
        candidates = [(self._pay_key, self._pay_src, self._pay_out)]
        if self.cache is not None and self.cache.prefix is not None:
            candidates.append(self.cache.prefix)
        for cached_key, src, out in candidates:
            size = len(src)
            if not 0 < size <= room or cached_key != key or not _same(src[0], messages[start]):
                continue  # cheap rejections first: another session's prefix differs at its start
            if src == messages[start : start + size]:
                return out, src
        return self._process([summary_message(self.summary)] if self.summary is not None else []), []

    def _process(self, view: Sequence[Message]) -> list[Message]:
        """Level-2 truncation (if active), repair and the result cap, for a run of whole regions."""
        if self.truncate_chars is not None:
            view = truncate_tool_results(view, self.truncate_chars)
        return truncate_tool_results(repair_transcript(view), self.limits.max_tool_result_chars)

    def tokens(self, messages: Sequence[Message]) -> int:
        """Estimated tokens of the view, like :func:`estimate_context_tokens` but O(new messages) per call.

        The last successful assistant message's reported usage counts the context up to it; later
        messages are estimated. Usage reported before the last compaction (or before the cut) is
        not trusted. Per-message estimates are cached, so the check before every model call does
        not re-estimate (and re-serialise) the whole conversation.
        """
        self._sync_cache(messages)
        floor = max(self.cut, self.compacted_len or 0)
        lowest = max(floor, self._usage_free)  # messages below it are known to report no usage
        for index in range(len(messages) - 1, lowest - 1, -1):
            reported = reported_usage(messages[index])
            if reported > 0:
                return reported + self._estimate_range(messages, index + 1)
        if floor <= self._usage_free:
            self._usage_free = len(messages)
        summary = estimate_message_tokens(summary_message(self.summary)) if self.summary is not None else 0
        return summary + self._estimate_range(messages, self.cut)

    def _sync_cache(self, messages: Sequence[Message]) -> None:
        """Drop cached estimates from the first message that is no longer in place (e.g. a popped error)."""
        seen = self._seen
        if seen and len(seen) <= len(messages) and seen[-1] is messages[len(seen) - 1]:
            keep = len(seen)  # the usual case: the conversation only grew
        else:
            keep = 0
            while keep < len(seen) and keep < len(messages) and seen[keep] is messages[keep]:
                keep += 1
        del seen[keep:]
        del self._estimates[keep:]
        self._usage_free = min(self._usage_free, keep)
        seen.extend(messages[keep:])
        self._estimates.extend([None] * (len(messages) - keep))

    def _estimate_range(self, messages: Sequence[Message], start: int) -> int:
        """Estimated tokens of ``messages[start:]``, each message estimated at most once per run."""
        estimates = self._estimates
        try:
            index = estimates.index(None, start)  # the unestimated ones, found at C speed
            while True:
                estimates[index] = estimate_message_tokens(messages[index])
                index = estimates.index(None, index + 1)
        except ValueError:
            pass
        return sum(estimates[start:])  # type: ignore[arg-type]  # no None left from start on

    def budget(self, messages: Sequence[Message]) -> TokenBudget:
        """The run's budget with the conversation layer re-estimated (system and tools unchanged)."""
        return self.base_budget.with_conversation(self.tokens(messages), 0)

    # ------------------------------------------------------------------ compaction

    async def maybe_compact(self, messages: Sequence[Message], signal: AbortSignal | None) -> None:
        """Proactive compaction: when the budget says the prompt eats into the reserves, summarise first.

        Tried at most once per conversation length, so a compaction that cannot help does
        not run before every call.
        """
        if self.proactive_tried_at == len(messages) or not should_compact(self.budget(messages)):
            return
        self.proactive_tried_at = len(messages)
        await self.compact(messages, "context_limit", signal)

    async def compact(
        self,
        messages: Sequence[Message],
        trigger: CompactionTrigger,
        signal: AbortSignal | None,
        *,
        retry_if_failed: bool = False,
    ) -> bool:
        """Summarise the old part of the kept messages and move the cut; False when nothing changed.

        Nothing is announced when nothing is old enough to summarise. ``retry_if_failed`` is
        what a failed compaction's end event says about a retry (overflow recovery: whether
        truncating tool results is still left to try).
        """
        tail = list(messages[self.cut :])
        if not plan_compaction(tail, self.limits.keep_recent_tokens).to_summarize:
            return False
        self.compacting = True
        before = estimate_tokens(self.view(messages))
        self.emit(CompactionStartEvent(trigger, len(tail), before))
        try:
            outcome = await compact(
                tail,
                self.stream_fn,
                self.model,
                keep_recent_tokens=self.limits.keep_recent_tokens,
                reserve_tokens=self.limits.reserve_tokens,
                trigger=trigger,
                previous_summary=self.summary,
                signal=signal,
            )
        except CompactionError as exc:
            self.failure = exc.error
            self.emit(CompactionEndEvent(None, exc.error.message, will_retry=retry_if_failed))
            return False
        finally:
            self.compacting = False
        if outcome is None:  # planned above, so only if the plan changed meanwhile
            self.emit(CompactionEndEvent(None, "nothing old enough to summarise", retry_if_failed))
            return False
        if outcome.record.tokens_after >= before:
            self._refuse(before, outcome.record.tokens_after, retry_if_failed)
            return False
        result = outcome.record
        self.failure = None  # an earlier failed or refused summary no longer says why the context does not fit
        self.cut += outcome.first_kept_index
        self.summary = result.summary
        self.compacted_len = len(messages)
        self.compaction = result
        self.compactions.append((result, self.cut))
        self.emit(CompactionEndEvent(result, None, will_retry=trigger == "overflow_recovery"))
        return True

    def _refuse(self, before: int, after: int, retry_if_failed: bool) -> None:
        """A summary that would not make the context smaller: the history stays as it was, as after a failed one.

        Kept, it would make every later call larger (a summariser that pads, or repeats the previous summary
        and the kept messages); the overflow path goes on as for a failed summary (level 2, or the error).
        """
        message = (
            f"compaction refused: the summary would not make the context smaller (~{before} → ~{after} tokens); "
            "the conversation is kept as it was"
        )
        log.warning("%s (%s)", message, self.model.ref)
        self.failure = AgentError("compaction_failure", message, retryable=True)
        self.emit(CompactionEndEvent(None, message, will_retry=retry_if_failed))

    async def recover(
        self, messages: Sequence[Message], signal: AbortSignal | None, detail: str | None
    ) -> AgentError | None:
        """One overflow error: level 1 compact, level 2 truncate tool results, level 3 the final error.

        Returns ``None`` when the call should be retried, else the error to end the run with.
        """
        cap = self.limits.overflow_tool_result_chars
        if self.level == 0:
            self.level = 1
            if await self.compact(messages, "overflow_recovery", signal, retry_if_failed=self.truncatable(messages)):
                return None
        if self.level == 1:
            self.level = 2
            if self.truncatable(messages):
                self.truncate_chars = cap
                return None
        self.level = 3
        if self.failure is not None:
            return self.failure
        fixed = self.base_budget.system + self.base_budget.tools  # sent with every call: part of what did not fit
        tokens = estimate_tokens(self.view(messages)) + fixed
        compacted, truncated = self.summary is not None, self.truncate_chars is not None
        return overflow_error(self.model, tokens, detail, compacted=compacted, truncated=truncated)

    def truncatable(self, messages: Sequence[Message]) -> bool:
        """Would level 2 change anything: is a tool result in the view longer than the overflow cap?"""
        cap = self.limits.overflow_tool_result_chars
        return any(isinstance(m, ToolResultMessage) and len(m.text) > cap for m in self.view(messages))

    def reset(self) -> None:
        """A model call succeeded: a later overflow starts again at level 1 (seed 001)."""
        self.level = 0
