"""How a run ended, in the result's terms: its stop reason and error.

The agent loop ends with an ``agent_end`` event (``reason`` and maybe an ``error``); the run adds
what the loop cannot know: its own timeout, an abort from outside, an error the overflow
recovery gave up with. This turns all of that into seed 000's ``stop_reason`` and the
:class:`AgentError` the caller sees, and says when a loop's end is an overflow the run can
recover from by compacting.
"""

from __future__ import annotations

from nexus.agent import AgentEndEvent
from nexus.engine.types import AgentError, RunStopReason, agent_error_from_message
from nexus.llm import AssistantMessage, Message


def run_outcome(
    response: list[Message],
    *,
    end: AgentEndEvent | None,
    timed_out: bool,
    timeout_ms: int,
    final_error: AgentError | None,
    aborted: bool,
) -> tuple[RunStopReason, AgentError | None]:
    """Seed 000's stop reason (and error) from how the loop ended (``end``: its ``agent_end``, if any)."""
    last = next((m for m in reversed(response) if isinstance(m, AssistantMessage)), None)
    if timed_out:
        text = (
            f"The run exceeded its timeout of {timeout_ms} ms and was stopped; the partial output was "
            "kept. Raise timeout_ms or split the task."
        )
        return "timeout", AgentError("timeout", text, retryable=True)
    if final_error is not None:
        return "error", final_error
    if aborted or (end is not None and end.reason == "aborted"):
        return "aborted", None
    if end is None or end.reason == "error":
        if last is not None and last.stop_reason == "error" and last.error_kind is not None:
            return "error", agent_error_from_message(last)
        text = (end.error if end is not None else None) or "the run failed"
        return "error", AgentError("unknown" if last is None or last.error_kind is None else "model_error", text)
    if end.reason == "max_iterations":
        return "tool_use", None
    if last is not None and last.stop_reason == "length":
        return "max_tokens", None
    return ("tool_use" if last is not None and last.stop_reason == "tool_use" else "end_turn"), None


def is_overflow(end: AgentEndEvent, last: object) -> bool:
    """The loop ended because the prompt did not fit, before any output: recoverable by compaction."""
    return (
        end.reason == "error"
        and isinstance(last, AssistantMessage)
        and last.error_kind == "context_overflow"
        and not any(getattr(b, "text", "") or getattr(b, "name", "") for b in last.content)
    )
