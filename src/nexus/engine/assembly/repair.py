"""Transcript repair before every LLM call: a tool call and its result travel as one unit.

Providers reject a transcript where a tool call has no result, or a result has no call
(Anthropic answers 400 on every later turn — OpenClaw #4600, #5518). Crashes, aborts and
compaction all produce such transcripts, so the payload is repaired right before it is
sent. The input list and its messages are never modified: the repaired list is a copy.

Rules, applied per assistant message with tool calls (its "region" runs to the next
assistant message):
- each call gets exactly one result, placed right after the call's message in call order;
  a result displaced later in the region (e.g. after a steering message) is moved back;
- a call without a result gets a synthetic error result (:data:`MISSING_RESULT_TEXT`);
- a result whose call is not in the preceding assistant message is dropped, as are
  duplicate results;
- an ``error``/``aborted`` assistant message keeps only the calls that did run (have a
  result) — the others may carry half-streamed arguments and never ran; if nothing is
  left of it, the message is dropped.
Anything that is not an ``nexus.llm`` message (custom agent messages) passes through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from nexus.agent import AgentToolResult
from nexus.engine.assembly._truncate import truncate_content
from nexus.llm import AssistantMessage, TextContent, ToolCall, ToolResultMessage

MISSING_RESULT_TEXT = (
    "No result provided: the run was interrupted before this tool finished, so its outcome is unknown. "
    "Check the current state (e.g. read the file or list the directory) and call the tool again if you still need it."
)
"""The text of a synthetic result for an orphaned tool call; tells the model how to recover."""

_M = TypeVar("_M")


def synthetic_result(call: ToolCall, timestamp: int) -> ToolResultMessage:
    """The error result that stands in for a tool call whose result was never recorded."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(MISSING_RESULT_TEXT)],
        is_error=True,
        details={"synthetic": True, "reason": "missing_result"},
        timestamp=timestamp,
    )


def _region_end(messages: Sequence[object], start: int) -> int:
    end = start
    while end < len(messages) and not isinstance(messages[end], AssistantMessage):
        end += 1
    return end


def _repair_turn(assistant: AssistantMessage, region: Sequence[object]) -> list[object]:
    """The assistant message (maybe trimmed), its results in call order, then the region's other messages."""
    calls = assistant.tool_calls
    call_ids = {c.id for c in calls}
    found: dict[str, ToolResultMessage] = {}
    others: list[object] = []
    for item in region:
        if isinstance(item, ToolResultMessage):
            if item.tool_call_id in call_ids and item.tool_call_id not in found:
                found[item.tool_call_id] = item
            continue  # orphaned or duplicate result: dropped
        others.append(item)
    head: list[object] = []
    if assistant.stop_reason in ("error", "aborted"):
        kept = [b for b in assistant.content if not isinstance(b, ToolCall) or b.id in found]
        if kept != assistant.content:
            assistant = replace(assistant, content=kept)
        calls = assistant.tool_calls
        if assistant.content:
            head.append(assistant)
    else:
        head.append(assistant)
    results = [found.get(c.id) or synthetic_result(c, assistant.timestamp) for c in calls]
    return [*head, *results, *others]


def repair_transcript(messages: Sequence[_M]) -> list[_M]:
    """A repaired copy of ``messages`` in which every tool call has exactly one result after it.

    Usable as the agent's ``transform_context`` hook; see the module docstring for the rules.
    """
    out: list[object] = []
    index = 0
    while index < len(messages):
        item: object = messages[index]
        if isinstance(item, ToolResultMessage):
            index += 1  # a result before any assistant message: no call can own it
            continue
        if isinstance(item, AssistantMessage) and (item.tool_calls or item.stop_reason in ("error", "aborted")):
            end = _region_end(messages, index + 1)
            if item.tool_calls:
                out.extend(_repair_turn(item, messages[index + 1 : end]))
            else:
                if item.content:  # an empty failed response (e.g. a 429 before any output) is not sendable
                    out.append(item)
                out.extend(m for m in messages[index + 1 : end] if not isinstance(m, ToolResultMessage))
            index = end
            continue
        out.append(item)
        index += 1
    return out  # type: ignore[return-value]


def truncate_result(result: AgentToolResult, max_chars: int) -> AgentToolResult:
    """``result`` with its text cut to ``max_chars`` (plus a marker); the same object when short enough.

    Tools can return megabytes (a ``cat`` of a log); the model gets the head (and the tail
    when it looks important), and ``details['truncated_chars']`` records how much was cut.
    """
    content, removed = truncate_content(result.content, max_chars)
    if removed == 0:
        return result
    details = dict(result.details or {})
    details["truncated_chars"] = removed
    return AgentToolResult(content, details, result.is_error)
