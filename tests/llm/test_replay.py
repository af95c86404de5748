"""The cross-provider replay transform every provider runs before encoding."""

from __future__ import annotations

import re

from nexus.llm import (
    AssistantMessage,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from nexus.llm._replay import NO_RESULT_TEXT, anthropic_tool_id, openai_tool_id, prepare_messages

TARGET = Model(id="claude-x", provider="anthropic", api="anthropic-messages")


def assistant(*blocks: object, model: str = "gpt-x", stop: str = "tool_use") -> AssistantMessage:
    return AssistantMessage(
        content=list(blocks),  # type: ignore[arg-type]
        api="openai-completions",
        provider="openai",
        model=model,
        stop_reason=stop,  # type: ignore[arg-type]
    )


def result(call_id: str, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(call_id, "read", [TextContent(text)])


def test_foreign_thinking_becomes_text_and_redacted_is_dropped() -> None:
    msgs: list[Message] = [
        UserMessage("q"),
        assistant(
            ThinkingContent("reasoning here", signature="sig"),
            ThinkingContent("", signature="enc", redacted=True),
            TextContent("answer"),
            stop="stop",
        ),
    ]
    out = prepare_messages(msgs, TARGET, anthropic_tool_id)
    assert isinstance(out[1], AssistantMessage)
    assert out[1].content == [TextContent("reasoning here"), TextContent("answer")]
    # the input is not mutated
    assert isinstance(msgs[1], AssistantMessage) and isinstance(msgs[1].content[0], ThinkingContent)


def test_same_model_thinking_kept_and_empty_unsigned_dropped() -> None:
    same = AssistantMessage(
        content=[ThinkingContent("x", signature="s"), ThinkingContent(""), TextContent("a")],
        api=TARGET.api,
        provider=TARGET.provider,
        model=TARGET.id,
    )
    out = prepare_messages([UserMessage("q"), same], TARGET, anthropic_tool_id)
    assert out[1].content == [ThinkingContent("x", signature="s"), TextContent("a")]  # type: ignore[union-attr]


def test_tool_ids_normalised_and_results_remapped() -> None:
    long_id = "call_" + "x" * 80
    msgs: list[Message] = [
        UserMessage("q"),
        assistant(ToolCall("fc|weird.id", "read", {}), ToolCall(long_id, "read", {})),
        result("fc|weird.id"),
        result(long_id),
    ]
    out = prepare_messages(msgs, TARGET, anthropic_tool_id)
    calls = out[1].content  # type: ignore[union-attr]
    ids = [c.id for c in calls]  # type: ignore[union-attr]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)
    assert [m.tool_call_id for m in out[2:]] == ids  # type: ignore[union-attr]
    openai_out = prepare_messages(msgs, Model("gpt", "openai", "openai-completions"), openai_tool_id)
    assert all(len(c.id) <= 40 for c in openai_out[1].content)  # type: ignore[union-attr]
    assert openai_out[1].content[0].id == "fc|weird.id"  # type: ignore[union-attr]


def test_errored_and_aborted_assistant_messages_dropped_with_their_results() -> None:
    msgs: list[Message] = [
        UserMessage("q"),
        assistant(ToolCall("c1", "read", {}), stop="aborted"),
        result("c1"),
        assistant(TextContent("half"), stop="error"),
        UserMessage("again"),
    ]
    out = prepare_messages(msgs, TARGET, anthropic_tool_id)
    assert [m.role for m in out] == ["user", "user"]


def test_missing_result_gets_synthetic_error_and_orphan_results_dropped() -> None:
    msgs: list[Message] = [
        UserMessage("q"),
        assistant(ToolCall("c1", "read", {}), ToolCall("c2", "read", {})),
        result("c1"),
        result("ghost"),
        UserMessage("next"),
        assistant(ToolCall("c3", "read", {})),
    ]
    out = prepare_messages(msgs, TARGET, anthropic_tool_id)
    assert [m.role for m in out] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "user",
        "assistant",
        "tool_result",
    ]
    synthetic = out[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.tool_call_id == "c2" and synthetic.is_error and synthetic.text == NO_RESULT_TEXT
    last = out[6]
    assert isinstance(last, ToolResultMessage) and last.tool_call_id == "c3" and last.is_error


def test_id_helpers() -> None:
    assert anthropic_tool_id("toolu_01") == "toolu_01"
    assert anthropic_tool_id("a b/c") == "a_b_c"
    assert len(anthropic_tool_id("y" * 100)) == 64
    assert anthropic_tool_id("y" * 100) != anthropic_tool_id("y" * 99 + "z")
    assert openai_tool_id("call_1") == "call_1" and len(openai_tool_id("z" * 41)) == 40


def test_ids_that_collide_are_made_unique_and_results_follow() -> None:
    # "a.b" and "a_b" both normalise to "a_b" for Anthropic; a server that numbers calls per turn
    # (ids missing → "call_0") repeats the same id in every turn. Anthropic rejects duplicate tool_use ids.
    msgs: list[Message] = [
        UserMessage("q"),
        assistant(ToolCall("a.b", "read", {}), ToolCall("a_b", "read", {})),
        result("a.b", "first"),
        result("a_b", "second"),
        assistant(ToolCall("call_0", "read", {})),
        result("call_0", "turn 2"),
        assistant(ToolCall("call_0", "read", {})),
        result("call_0", "turn 3"),
    ]
    out = prepare_messages(msgs, TARGET, anthropic_tool_id)
    call_ids = [c.id for m in out if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(call_ids) == len(set(call_ids)) == 4
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in call_ids)
    results = [(m.tool_call_id, m.text) for m in out if isinstance(m, ToolResultMessage)]
    assert results == list(zip(call_ids, ["first", "second", "turn 2", "turn 3"], strict=True))
    assert not any(m.is_error for m in out if isinstance(m, ToolResultMessage))
    assert msgs[4].content[0].id == "call_0"  # type: ignore[union-attr]  # the input is never mutated
