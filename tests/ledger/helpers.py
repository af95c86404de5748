"""Message builders shared by the ledger tests and the conformance suite."""

from __future__ import annotations

from nexus.llm.types import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage


def user(text: str) -> UserMessage:
    """A plain user message."""
    return UserMessage(text)


def reply(text: str, *, input_tokens: int = 10, output_tokens: int = 5) -> AssistantMessage:
    """A final assistant text message with usage."""
    return AssistantMessage(
        [TextContent(text)],
        api="openai-completions",
        provider="fake",
        model="fake-model",
        usage=Usage(input_tokens, output_tokens, total=input_tokens + output_tokens),
    )


def tool_round(call_id: str, name: str = "read", result: str = "file body") -> list[Message]:
    """An assistant tool call and its result (one unit)."""
    call = AssistantMessage(
        [ToolCall(call_id, name, {"path": f"{call_id}.txt"})],
        api="openai-completions",
        provider="fake",
        model="fake-model",
        stop_reason="tool_use",
        usage=Usage(7, 3, total=10),
    )
    return [call, ToolResultMessage(call_id, name, [TextContent(result)])]


def texts(messages: list[Message]) -> list[str]:
    """A compact text view of a message list, for readable assertions."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(
                "U:" + (m.content if isinstance(m.content, str) else "".join(getattr(b, "text", "") for b in m.content))
            )
        elif isinstance(m, AssistantMessage):
            calls = ",".join(c.id for c in m.tool_calls)
            out.append("A:" + (m.text or f"call({calls})"))
        else:
            out.append(f"R:{m.tool_call_id}")
    return out
