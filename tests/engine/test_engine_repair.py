"""Transcript repair: every tool call gets exactly one result, the input is never touched."""

from __future__ import annotations

import copy

from nexus.agent.tool_types import AgentToolResult
from nexus.engine.assembly.repair import MISSING_RESULT_TEXT, repair_transcript, truncate_result
from nexus.llm.types import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def call(id: str, name: str = "read") -> ToolCall:
    return ToolCall(id, name, {"path": f"{id}.txt"})


def result(id: str, text: str = "ok", name: str = "read") -> ToolResultMessage:
    return ToolResultMessage(id, name, [TextContent(text)])


def asst(*calls: ToolCall, text: str = "", stop: str = "tool_use") -> AssistantMessage:
    content: list[TextContent | ToolCall] = [TextContent(text)] if text else []
    return AssistantMessage(content=[*content, *calls], stop_reason=stop)  # type: ignore[arg-type]


def shape(messages: list[Message]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            out.append(f"result:{m.tool_call_id}{'!' if m.is_error else ''}")
        elif isinstance(m, AssistantMessage):
            out.append("assistant:" + ",".join(c.id for c in m.tool_calls))
        else:
            out.append("user")
    return out


def test_valid_transcript_is_unchanged_but_copied() -> None:
    messages: list[Message] = [UserMessage("hi"), asst(call("a")), result("a"), asst(text="done", stop="stop")]
    repaired = repair_transcript(messages)
    assert repaired == messages and repaired is not messages
    assert all(x is y for x, y in zip(repaired, messages, strict=True))


def test_orphaned_call_gets_synthetic_error_result_and_input_is_not_mutated() -> None:
    messages: list[Message] = [UserMessage("hi"), asst(call("a"), call("b")), result("a"), UserMessage("next")]
    before = copy.deepcopy(messages)
    repaired = repair_transcript(messages)
    assert messages == before
    assert shape(repaired) == ["user", "assistant:a,b", "result:a", "result:b!", "user"]
    synthetic = repaired[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.text == MISSING_RESULT_TEXT and synthetic.tool_name == "read"
    assert "call the tool again" in synthetic.text
    assert synthetic.details == {"synthetic": True, "reason": "missing_result"}


def test_call_at_end_of_transcript_is_repaired() -> None:
    messages: list[Message] = [UserMessage("hi"), asst(call("a"))]
    repaired = repair_transcript(messages)
    assert shape(repaired) == ["user", "assistant:a", "result:a!"]


def test_results_without_call_are_dropped() -> None:
    messages: list[Message] = [result("ghost"), UserMessage("hi"), asst(text="hello", stop="stop"), result("x")]
    assert shape(repair_transcript(messages)) == ["user", "assistant:"]


def test_results_are_reordered_to_call_order_and_duplicates_dropped() -> None:
    messages: list[Message] = [
        UserMessage("go"),
        asst(call("a"), call("b")),
        result("b"),
        result("a"),
        result("a", "dup"),
    ]
    repaired = repair_transcript(messages)
    assert shape(repaired) == ["user", "assistant:a,b", "result:a", "result:b"]
    first = repaired[2]
    assert isinstance(first, ToolResultMessage) and first.text == "ok"


def test_result_displaced_after_a_user_message_is_moved_back() -> None:
    messages: list[Message] = [asst(call("a")), UserMessage("steer"), result("a")]
    assert shape(repair_transcript(messages)) == ["assistant:a", "result:a", "user"]


def test_result_for_a_call_of_an_earlier_turn_is_not_moved_across_assistant_messages() -> None:
    messages: list[Message] = [asst(call("a")), asst(call("b")), result("a"), result("b")]
    assert shape(repair_transcript(messages)) == ["assistant:a", "result:a!", "assistant:b", "result:b"]


def test_aborted_assistant_keeps_only_calls_that_ran() -> None:
    aborted = asst(call("a"), call("b"), text="working", stop="aborted")
    messages: list[Message] = [UserMessage("go"), aborted, result("a")]
    repaired = repair_transcript(messages)
    assert shape(repaired) == ["user", "assistant:a", "result:a"]
    assert len(aborted.tool_calls) == 2  # the original message is untouched


def test_errored_assistant_with_only_unran_calls_is_dropped_with_its_results() -> None:
    failed = asst(call("a"), stop="error")
    messages: list[Message] = [UserMessage("go"), failed, UserMessage("again")]
    assert shape(repair_transcript(messages)) == ["user", "user"]


def test_empty_error_response_is_dropped_and_stray_results_too() -> None:
    empty = AssistantMessage(stop_reason="error", error_message="429")
    messages: list[Message] = [UserMessage("go"), empty, result("zzz"), UserMessage("again")]
    assert shape(repair_transcript(messages)) == ["user", "user"]


def test_custom_messages_pass_through() -> None:
    marker = object()
    repaired = repair_transcript([UserMessage("x"), marker, asst(call("a"))])
    assert repaired[1] is marker and len(repaired) == 4


def test_truncate_result_keeps_head_marks_cut_and_does_not_mutate() -> None:
    original = AgentToolResult([TextContent("line\n" * 5_000), ImageContent("AAAA", "image/png")], {"k": 1})
    cut = truncate_result(original, 1_000)
    text = cut.content[0]
    assert isinstance(text, TextContent)
    assert text.text.startswith("line\nline") and "truncated" in text.text
    assert len(text.text) < 1_300
    assert isinstance(cut.content[1], ImageContent)
    assert cut.details is not None and cut.details["k"] == 1 and cut.details["truncated_chars"] > 20_000
    assert original.details == {"k": 1} and len(original.content[0].text) == 25_000  # type: ignore[union-attr]


def test_truncate_result_keeps_important_tail() -> None:
    body = "x" * 10_000 + "\nTraceback: boom\nexit code 1"
    cut = truncate_result(AgentToolResult.text(body, is_error=True), 2_000)
    text = cut.content[0]
    assert isinstance(text, TextContent)
    assert text.text.endswith("exit code 1") and "omitted from the middle" in text.text
    assert cut.is_error


def test_short_result_is_returned_as_is() -> None:
    short = AgentToolResult.text("small")
    assert truncate_result(short, 100) is short
