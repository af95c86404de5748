"""JSON round-trip of every message and content type (the ledger depends on it)."""

from __future__ import annotations

import pytest

from nexus.llm.serde import MessageFormatError, message_from_json, message_to_json
from nexus.llm.types import (
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

MESSAGES: list[Message] = [
    UserMessage("hello", timestamp=1),
    UserMessage([TextContent("look"), ImageContent("aGVsbG8=", "image/png")], timestamp=2),
    AssistantMessage(
        content=[
            ThinkingContent("hmm", signature="sig"),
            ThinkingContent("", signature="opaque", redacted=True),
            TextContent("answer"),
            ToolCall("call_1", "read", {"path": "a.txt"}),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(10, 5, 3, 2, 1, 20, Cost(0.1, 0.2, 0.01, 0.02, 0.33)),
        stop_reason="tool_use",
        timestamp=3,
    ),
    AssistantMessage(stop_reason="error", error_message="boom", error_kind="rate_limit", retry_after=2.0, timestamp=4),
    ToolResultMessage("call_1", "read", [TextContent("data")], is_error=True, details={"lines": 3}, timestamp=5),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.role)
def test_round_trip(message: Message) -> None:
    assert message_from_json(message_to_json(message)) == message


def test_unknown_role_is_named() -> None:
    with pytest.raises(MessageFormatError, match="unknown role 'system'"):
        message_from_json('{"role": "system", "content": "x"}')


def test_bad_block_is_named() -> None:
    with pytest.raises(MessageFormatError, match="unknown block type 'video'"):
        message_from_json('{"role": "user", "content": [{"type": "video"}]}')


def test_invalid_json_is_reported() -> None:
    with pytest.raises(MessageFormatError, match="not valid JSON"):
        message_from_json("{")
