"""What the model sees of a run's conversation: summary + kept messages, repaired and truncated.

The run keeps the whole conversation (history + this turn) untouched, because that is what
the ledger stores. Compaction only moves a cut: the model is sent the summary, then the
messages from the cut on. Every payload is repaired (a tool call and its result are one
unit) and tool results are capped, right before each model call, on a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from nexus.engine.budget import estimate_message_tokens, estimate_tokens, should_compact
from nexus.engine.compaction import (
    SUMMARY_PREFIX,
    CompactionError,
    compact,
    overflow_error,
    summary_message,
    truncate_tool_results,
)
from nexus.engine.repair import repair_transcript
from nexus.engine.types import (
    AgentError,
    CompactionEndEvent,
    CompactionResult,
    CompactionStartEvent,
    CompactionTrigger,
    EngineEvent,
    EngineLimits,
    TokenBudget,
)
from nexus.llm.abort import AbortSignal
from nexus.llm.options import StreamFn
from nexus.llm.types import AssistantMessage, Message, Model, ToolResultMessage, UserMessage


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
    compaction: CompactionResult | None = None
    compacted_len: int | None = None
    failure: AgentError | None = None
    proactive_tried_at: int = -1
    compacting: bool = False
    _seen: list[Message] = field(default_factory=list, repr=False)
    _estimates: list[int | None] = field(default_factory=list, repr=False)

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
    ) -> ContextWindow:
        """Start from the ledger's history (its leading summary message becomes ``summary``)."""
        summary = stored_summary(history)
        return cls(model, stream_fn, limits, budget, emit, summary=summary, cut=1 if summary is not None else 0)

    # ------------------------------------------------------------------ views

    def view(self, messages: Sequence[Message]) -> list[Message]:
        """Summary message (if any) + the messages from the cut on, before repair."""
        kept = list(messages[self.cut :])
        if self.summary is None:
            return kept
        return [summary_message(self.summary), *kept]

    def payload(self, messages: Sequence[Message]) -> list[Message]:
        """What is sent to the model: the view, level-2 truncated if needed, repaired, results capped."""
        view = self.view(messages)
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
        for index in range(len(messages) - 1, floor - 1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.stop_reason not in ("error", "aborted"):
                u = message.usage
                reported = u.input + u.output + u.cache_read + u.cache_write
                if reported > 0:
                    return reported + self._estimate_range(messages, index + 1)
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
        seen.extend(messages[keep:])
        self._estimates.extend([None] * (len(messages) - keep))

    def _estimate_range(self, messages: Sequence[Message], start: int) -> int:
        """Estimated tokens of ``messages[start:]``, each message estimated at most once per run."""
        estimates = self._estimates
        total = 0
        for index in range(start, len(messages)):
            value = estimates[index]
            if value is None:
                value = estimates[index] = estimate_message_tokens(messages[index])
            total += value
        return total

    def budget(self, messages: Sequence[Message]) -> TokenBudget:
        """The run's budget with the conversation layer re-estimated (system and tools unchanged)."""
        return replace(self.base_budget, history=self.tokens(messages), current=0)

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
        self, messages: Sequence[Message], trigger: CompactionTrigger, signal: AbortSignal | None
    ) -> bool:
        """Summarise the old part of the kept messages and move the cut; False when nothing changed."""
        tail = list(messages[self.cut :])
        self.compacting = True
        self.emit(CompactionStartEvent(trigger, len(tail), estimate_tokens(self.view(messages))))
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
            self.emit(CompactionEndEvent(None, exc.error.message, will_retry=trigger == "overflow_recovery"))
            return False
        finally:
            self.compacting = False
        if outcome is None:
            self.emit(CompactionEndEvent(None, "nothing old enough to summarise", trigger == "overflow_recovery"))
            return False
        result = outcome.result
        self.cut += result.first_kept_index
        self.summary = result.summary
        self.compacted_len = len(messages)
        self.compaction = result
        self.emit(CompactionEndEvent(result, None, will_retry=trigger == "overflow_recovery"))
        return True

    async def recover(
        self, messages: Sequence[Message], signal: AbortSignal | None, detail: str | None
    ) -> AgentError | None:
        """One overflow error: level 1 compact, level 2 truncate tool results, level 3 the final error.

        Returns ``None`` when the call should be retried, else the error to end the run with.
        """
        if self.level == 0:
            self.level = 1
            if await self.compact(messages, "overflow_recovery", signal):
                return None
        if self.level == 1:
            self.level = 2
            cap = self.limits.overflow_tool_result_chars
            view = self.view(messages)
            if any(isinstance(m, ToolResultMessage) and len(m.text) > cap for m in view):
                self.truncate_chars = cap
                return None
        self.level = 3
        if self.failure is not None:
            return self.failure
        return overflow_error(self.model, estimate_tokens(self.view(messages)), detail)

    def reset(self) -> None:
        """A model call succeeded: a later overflow starts again at level 1 (seed 001)."""
        self.level = 0
