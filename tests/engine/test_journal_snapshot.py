"""The crash journal's snapshot of a streaming reply: a copy the stream cannot change, made cheaply.

The snapshot is taken on the event loop, for every run, every ``PARTIAL_INTERVAL_S`` (4,000 a second
with 1,000 runs streaming): what it copies must not follow the later deltas, and its cost must not
be a Python-level step per field of every object it copies.
"""

from __future__ import annotations

import sys
from types import FrameType

from nexus.engine.execution._journal import snapshot
from nexus.llm import AssistantMessage, TextContent, ThinkingContent, ToolCall


def _streaming() -> AssistantMessage:
    """A reply mid-stream: thinking, some text, a finished tool call and one still streaming."""
    message = AssistantMessage(api="openai-completions", provider="openai", model="gpt-4o-mini", response_id="r1")
    message.content = [
        ThinkingContent("let me look", signature="sig"),
        TextContent("reading two "),
        ToolCall(id="c1", name="ls", arguments={"path": "."}),
        ToolCall(id="c2", name="read", arguments={}),
    ]
    message.usage.input = 120
    message.usage.cost.input = 0.5
    return message


def test_a_snapshot_holds_the_reply_as_it_was_and_the_later_deltas_do_not_reach_it() -> None:
    live = _streaming()
    snap = snapshot(live, {2})
    assert snap.content == live.content[:3]  # the unfinished call left out
    assert (snap.api, snap.provider, snap.model, snap.response_id, snap.timestamp, snap.stop_reason) == (
        live.api,
        live.provider,
        live.model,
        live.response_id,
        live.timestamp,
        live.stop_reason,
    )
    assert snap.usage == live.usage
    live.content[1].text += "files"  # type: ignore[union-attr]
    live.content[0].thinking += " first"  # type: ignore[union-attr]
    live.content.append(TextContent("more"))
    live.usage.output = 7
    live.usage.cost.output = 0.25
    live.stop_reason = "tool_use"
    assert snap.content[0] == ThinkingContent("let me look", signature="sig")
    assert snap.content[1] == TextContent("reading two ")
    assert len(snap.content) == 3
    assert (snap.usage.output, snap.usage.cost.output, snap.usage.cost.input) == (0, 0.0, 0.5)
    assert snap.stop_reason == "stop"


def test_a_snapshot_does_not_make_a_builtin_call_per_field_it_copies() -> None:
    """The copy reads each object's fields in one C call: the builtin calls a snapshot makes are
    at most one per content block (its type check), not one per field (12 for the message alone)."""
    live = _streaming()
    from nexus._dataclass import WARM_CALLS

    for _ in range(WARM_CALLS + 1):  # warm: a class's own __init__ is compiled after its first WARM_CALLS uses
        snapshot(live, {2})
    builtin_calls: list[str] = []

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_call":
            builtin_calls.append(getattr(arg, "__name__", repr(arg)))

    sys.setprofile(count)
    try:
        snapshot(live, {2})
    finally:
        sys.setprofile(None)
    made = [name for name in builtin_calls if name != "setprofile"]
    assert len(made) <= len(live.content), made
