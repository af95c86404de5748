"""pi-coding-agent message shapes (camelCase) <-> ``nexus.llm`` messages.

pi: ``user{content: str | (text|image)[]}``, ``assistant{content: (text|thinking|toolCall)[], api, provider,
model, usage{input, output, cacheRead, cacheWrite, totalTokens, cost{...}}, stopReason, errorMessage?,
responseId?}``, ``toolResult{toolCallId, toolName, content, details?, isError}``; every message has a
ms ``timestamp``. Keys we do not model are returned as ``extra`` so an export can write them back.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from nexus.llm import (
    AssistantContent,
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)

PI_ROLES = ("user", "assistant", "toolResult")


def pi_json(line: str) -> Any:
    """One JSON line of a pi file, refused with ``UnicodeEncodeError`` when it holds a lone surrogate
    (``"\\ud800"``): valid JSON, but no UTF-8 text, so the ledger's write would fail after the checks."""
    raw = json.loads(line)
    if "\\u" in line:  # only an escape can make a surrogate: the file was read as UTF-8
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    return raw


def json_problem(exc: ValueError | RecursionError) -> str:
    """What is wrong with a pi line whose JSON was refused past its syntax (see ``pi_json``)."""
    if isinstance(exc, UnicodeError):
        return "text with a lone surrogate escape (such as \\ud800): not Unicode text any ledger can store"
    return "not valid JSON (nested too deeply, or a number too long)"


_STOP_TO_PI = {"tool_use": "toolUse"}
_STOP_FROM_PI = {"toolUse": "tool_use"}
_KNOWN = {
    "user": {"role", "content", "timestamp"},
    "assistant": {"role", "content", "api", "provider", "model", "usage", "stopReason", "errorMessage", "responseId",
                  "timestamp"},
    "toolResult": {"role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"},
}  # fmt: skip


class PiShapeError(ValueError):
    """A pi message has a shape we cannot read (the caller adds the line number)."""


def _blocks_in(items: Any, allowed: tuple[str, ...]) -> list[Any]:
    if not isinstance(items, list):
        raise PiShapeError("'content' must be a list or a string")
    out: list[Any] = []
    for b in items:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind not in allowed:
            raise PiShapeError(f"content block type {kind!r} is not allowed here (allowed: {', '.join(allowed)})")
        if kind == "text":
            out.append(TextContent(str(b["text"]), b.get("textSignature")))
        elif kind == "image":
            out.append(ImageContent(str(b["data"]), str(b["mimeType"])))
        elif kind == "thinking":
            out.append(ThinkingContent(str(b["thinking"]), b.get("thinkingSignature"), bool(b.get("redacted", False))))
        else:
            args = b.get("arguments")
            if not isinstance(args, dict):
                raise PiShapeError(f"toolCall {b.get('id')!r}: 'arguments' must be an object")
            out.append(ToolCall(str(b["id"]), str(b["name"]), args, None, b.get("thoughtSignature")))
    return out


def _usage_in(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    raw_cost = data.get("cost")
    cost: dict[str, Any] = raw_cost if isinstance(raw_cost, dict) else {}
    return Usage(
        input=_number(data, "input", int, "usage."),
        output=_number(data, "output", int, "usage."),
        cache_read=_number(data, "cacheRead", int, "usage."),
        cache_write=_number(data, "cacheWrite", int, "usage."),
        total=_number(data, "totalTokens", int, "usage."),
        cost=Cost(
            _number(cost, "input", float, "usage.cost."),
            _number(cost, "output", float, "usage.cost."),
            _number(cost, "cacheRead", float, "usage.cost."),
            _number(cost, "cacheWrite", float, "usage.cost."),
            _number(cost, "total", float, "usage.cost."),
        ),
    )


N = TypeVar("N", int, float)


def _number(data: dict[str, Any], key: str, kind: type[N], prefix: str = "") -> N:
    """``data[key]`` as ``kind`` (0 when absent), or a :class:`PiShapeError` naming the field and its value:
    the bare ``int()`` error ("invalid literal for int() with base 10") named neither."""
    value = data.get(key, 0)
    try:
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        noun = "an integer" if kind is int else "a number"
        raise PiShapeError(f"{prefix}{key} must be {noun} (got {value!r:.40})") from None


def from_pi(msg: dict[str, Any]) -> tuple[Message, dict[str, Any]]:
    """A nexus message from a pi message, and the pi keys it does not model."""
    role = msg.get("role")
    ts = _number(msg, "timestamp", int)  # milliseconds since the epoch
    try:
        if role == "user":
            content = msg.get("content")
            out: Message = UserMessage(
                content if isinstance(content, str) else _blocks_in(content, ("text", "image")), ts
            )
        elif role == "assistant":
            stop = str(msg.get("stopReason", "stop"))
            out = AssistantMessage(
                content=_blocks_in(msg.get("content"), ("text", "thinking", "toolCall")),
                api=str(msg.get("api", "")),
                provider=str(msg.get("provider", "")),
                model=str(msg.get("model", "")),
                usage=_usage_in(msg.get("usage")),
                stop_reason=_STOP_FROM_PI.get(stop, stop),  # type: ignore[arg-type]
                error_message=msg.get("errorMessage"),
                response_id=msg.get("responseId"),
                timestamp=ts,
            )
        elif role == "toolResult":
            out = ToolResultMessage(
                tool_call_id=str(msg["toolCallId"]),
                tool_name=str(msg["toolName"]),
                content=_blocks_in(msg.get("content"), ("text", "image")),
                is_error=bool(msg.get("isError", False)),
                details=msg.get("details"),
                timestamp=ts,
            )
        else:
            raise PiShapeError(f"message role {role!r} is not user, assistant or toolResult")
    except KeyError as exc:
        raise PiShapeError(f"{role} message is missing field {exc.args[0]!r}") from exc
    extra = {k: v for k, v in msg.items() if k not in _KNOWN[str(role)]}
    return out, extra


def entry_problem(raw: dict[str, Any]) -> str | None:
    """What is wrong with an entry after the header, by its type, or ``None`` (the tree's links are checked apart)."""
    if raw["type"] == "session":  # two files joined: it was reported as an entry with no 'parentId'
        return "a second session header: a pi file holds one session (import each file on its own)"
    if raw["type"] != "compaction":
        return None
    if not isinstance(raw.get("summary"), str):
        return "a compaction entry needs a string 'summary'"
    try:
        _number({"tokensBefore": raw.get("tokensBefore") or 0}, "tokensBefore", int)
    except PiShapeError as exc:
        return f"invalid compaction entry: {exc}"
    return None


def _block_out(block: UserContent | AssistantContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        out: dict[str, Any] = {"type": "text", "text": block.text}
        if block.signature is not None:
            out["textSignature"] = block.signature
        return out
    if isinstance(block, ImageContent):
        return {"type": "image", "data": block.data, "mimeType": block.mime_type}
    if isinstance(block, ThinkingContent):
        out = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["thinkingSignature"] = block.signature
        if block.redacted:
            out["redacted"] = True
        return out
    out = {"type": "toolCall", "id": block.id, "name": block.name, "arguments": block.arguments}
    if block.thought_signature is not None:
        out["thoughtSignature"] = block.thought_signature
    return out


def _usage_out(u: Usage) -> dict[str, Any]:
    c = u.cost
    return {
        "input": u.input,
        "output": u.output,
        "cacheRead": u.cache_read,
        "cacheWrite": u.cache_write,
        "totalTokens": u.total or (u.input + u.output + u.cache_read + u.cache_write),
        "cost": {"input": c.input, "output": c.output, "cacheRead": c.cache_read, "cacheWrite": c.cache_write,
                 "total": c.total},
    }  # fmt: skip


def _num(value: float) -> float | int:
    return int(value) if value == int(value) else value


def to_pi(message: Message, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pi form of a nexus message (``extra`` keys from an import are written back)."""
    if isinstance(message, UserMessage):
        content: Any = message.content
        out: dict[str, Any] = {
            "role": "user",
            "content": content if isinstance(content, str) else [_block_out(b) for b in content],
        }
    elif isinstance(message, AssistantMessage):
        usage = _usage_out(message.usage)
        usage["cost"] = {k: _num(v) for k, v in usage["cost"].items()}
        out = {
            "role": "assistant",
            "content": [_block_out(b) for b in message.content],
            "api": message.api,
            "provider": message.provider,
            "model": message.model,
            "usage": usage,
            "stopReason": _STOP_TO_PI.get(message.stop_reason, message.stop_reason),
        }
        if message.error_message is not None:
            out["errorMessage"] = message.error_message
    else:
        out = {
            "role": "toolResult",
            "toolCallId": message.tool_call_id,
            "toolName": message.tool_name,
            "content": [_block_out(b) for b in message.content],
        }
        if message.details is not None:
            out["details"] = message.details
        out["isError"] = message.is_error
    out["timestamp"] = message.timestamp
    if isinstance(message, AssistantMessage) and message.response_id is not None:
        out["responseId"] = message.response_id
    if extra:
        out.update(extra)
    return out
