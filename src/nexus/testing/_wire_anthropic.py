"""Anthropic messages wire shapes: SSE events, the non-stream JSON, and request → Context."""

from __future__ import annotations

import json
from typing import Any

from nexus.llm import (
    AssistantContent,
    AssistantMessage,
    Context,
    Message,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)
from nexus.testing import _chunks
from nexus.testing.steps import Reply, TextPart, ThinkingPart, ToolCallPart

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_use": "tool_use"}


def event(name: str, obj: dict[str, Any]) -> bytes:
    """One SSE event as Anthropic sends it (``event:`` and ``data:`` lines)."""
    return f"event: {name}\ndata: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def usage_for(reply: Reply, body: dict[str, Any]) -> Usage:
    """The reply's scripted usage, or the chars/4 estimate of the request and the reply."""
    if reply.usage is not None:
        return reply.usage
    sent = json.dumps([body.get("system"), body.get("messages"), body.get("tools")], ensure_ascii=False)
    return Usage(input=_chunks.estimate_tokens(len(sent)), output=_chunks.estimate_tokens(_chunks.reply_chars(reply)))


def _message_head(body: dict[str, Any], msg_id: str, usage: Usage) -> dict[str, Any]:
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "fake-model")),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": 1,
        },
    }


def _block_events(index: int, part: TextPart | ThinkingPart | ToolCallPart, chunk: int, tool_id: str) -> list[bytes]:
    def delta(payload: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": payload})

    if isinstance(part, TextPart):
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [delta({"type": "text_delta", "text": p}) for p in _chunks.pieces(part.text, chunk)]
    elif isinstance(part, ThinkingPart):
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [delta({"type": "thinking_delta", "thinking": p}) for p in _chunks.pieces(part.thinking, chunk)]
        deltas.append(delta({"type": "signature_delta", "signature": part.signature}))
    else:
        start = {"type": "tool_use", "id": tool_id, "name": part.name, "input": {}}
        raw = _chunks.arguments_json(part.arguments)
        deltas = [delta({"type": "input_json_delta", "partial_json": p}) for p in _chunks.pieces(raw, chunk)]
    head = event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
    tail = event("content_block_stop", {"type": "content_block_stop", "index": index})
    return [head, *deltas, tail]


def stream_frames(
    reply: Reply, body: dict[str, Any], chunk: int, id_suffix: str, *, usage_reported: bool = True
) -> list[bytes]:
    """Every SSE event of a streamed response, ``message_stop`` included.

    ``usage_reported=False`` leaves every ``usage`` object out, like an Anthropic-compatible
    server that counts nothing (nexus must estimate, never store 0 as a measurement).
    """
    usage = usage_for(reply, body)
    head = _message_head(body, f"msg_{id_suffix}", usage)
    if not usage_reported:
        del head["usage"]
    frames = [event("message_start", {"type": "message_start", "message": head}), event("ping", {"type": "ping"})]
    for index, part in enumerate(reply.parts):
        tool_id = (part.id or f"toolu_{id_suffix}_{index}") if isinstance(part, ToolCallPart) else ""
        frames += _block_events(index, part, chunk, tool_id)
    stop = {"stop_reason": _STOP[reply.effective_stop_reason], "stop_sequence": None}
    end: dict[str, Any] = {"type": "message_delta", "delta": stop}
    if usage_reported:
        end["usage"] = {"output_tokens": usage.output}
    frames.append(event("message_delta", end))
    frames.append(event("message_stop", {"type": "message_stop"}))
    return frames


def message_json(reply: Reply, body: dict[str, Any], id_suffix: str, *, usage_reported: bool = True) -> dict[str, Any]:
    """The non-streamed ``message`` object (without ``usage`` when not ``usage_reported``)."""
    usage = usage_for(reply, body)
    content: list[dict[str, Any]] = []
    for index, part in enumerate(reply.parts):
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            content.append({"type": "thinking", "thinking": part.thinking, "signature": part.signature})
        else:
            content.append(
                {
                    "type": "tool_use",
                    "id": part.id or f"toolu_{id_suffix}_{index}",
                    "name": part.name,
                    "input": dict(part.arguments),
                }
            )
    message = _message_head(body, f"msg_{id_suffix}", usage)
    message["content"] = content
    message["stop_reason"] = _STOP[reply.effective_stop_reason]
    message["usage"]["output_tokens"] = usage.output
    if not usage_reported:
        del message["usage"]
    return message


# --------------------------------------------------------------------------- request → Context


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _user_items(content: Any) -> list[Message]:
    if isinstance(content, str):
        return [UserMessage(content)]
    out: list[Message] = []
    texts: list[UserContent] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            result: list[UserContent] = [TextContent(_text_of(block.get("content")))]
            out.append(ToolResultMessage(str(block.get("tool_use_id", "")), "", result, bool(block.get("is_error"))))
        elif block.get("type") == "text":
            texts.append(TextContent(str(block.get("text", ""))))
    if texts:
        out.append(UserMessage(texts))
    return out


def _assistant(content: Any) -> AssistantMessage:
    blocks: list[AssistantContent] = []
    if isinstance(content, str):
        blocks.append(TextContent(content))
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append(TextContent(str(block.get("text", ""))))
        elif kind == "thinking":
            blocks.append(ThinkingContent(str(block.get("thinking", "")), block.get("signature")))
        elif kind == "tool_use":
            args = block.get("input")
            blocks.append(
                ToolCall(str(block.get("id", "")), str(block.get("name", "")), args if isinstance(args, dict) else {})
            )
    return AssistantMessage(content=blocks, api="anthropic-messages")


def context_from_body(body: dict[str, Any]) -> Context:
    """Best-effort :class:`Context` of a messages request (for ``from_context`` steps)."""
    context = Context(system_prompt=_text_of(body.get("system")))
    for item in body.get("messages") or []:
        if not isinstance(item, dict):
            continue
        if item.get("role") == "user":
            context.messages.extend(_user_items(item.get("content")))
        elif item.get("role") == "assistant":
            context.messages.append(_assistant(item.get("content")))
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and "name" in tool:
            context.tools.append(
                Tool(str(tool["name"]), str(tool.get("description", "")), tool.get("input_schema") or {})
            )
    return context
