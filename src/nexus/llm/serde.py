"""JSON round-trip of messages, content, usage, models and stream events.

The ledger stores these as compact JSON text, so the encoding omits fields at their
default value (``None``, ``False``, zero usage) and uses short, stable, snake_case keys.
Decoding is strict: an unknown ``role`` or block ``type`` raises :class:`MessageFormatError`
naming it, because silently dropping data on import would be worse than refusing it.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, cast

from nexus.errors import NexusError
from nexus.llm import events
from nexus.llm.events import AssistantMessageEvent
from nexus.llm.types import (
    AssistantContent,
    AssistantMessage,
    ContentBlock,
    Cost,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)


class MessageFormatError(NexusError, ValueError):
    """A stored or imported message does not have the expected shape; the text says where."""


# --------------------------------------------------------------------------- encode


def block_to_dict(block: ContentBlock) -> dict[str, Any]:
    """Encode one content block."""
    if isinstance(block, TextContent):
        out: dict[str, Any] = {"type": "text", "text": block.text}
        if block.signature is not None:
            out["signature"] = block.signature
        return out
    if isinstance(block, ThinkingContent):
        out = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        if block.redacted:
            out["redacted"] = True
        return out
    if isinstance(block, ImageContent):
        return {"type": "image", "data": block.data, "mime_type": block.mime_type}
    out = {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
    if block.raw_arguments is not None:
        out["raw_arguments"] = block.raw_arguments
    if block.thought_signature is not None:
        out["thought_signature"] = block.thought_signature
    return out


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    """Encode usage, leaving out zero counts (most are zero for most providers)."""
    out: dict[str, Any] = {}
    for name in ("input", "output", "cache_read", "cache_write", "reasoning", "total"):
        value = getattr(usage, name)
        if value:
            out[name] = value
    cost = usage.cost
    if cost.total:
        out["cost"] = {
            name: getattr(cost, name)
            for name in ("input", "output", "cache_read", "cache_write", "total")
            if getattr(cost, name)
        }
    if usage.estimated:
        out["estimated"] = True
    return out


def message_to_dict(message: Message) -> dict[str, Any]:
    """Encode a user, assistant or tool-result message."""
    if isinstance(message, UserMessage):
        content: Any = (
            message.content if isinstance(message.content, str) else [block_to_dict(b) for b in message.content]
        )
        return {"role": "user", "content": content, "timestamp": message.timestamp}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {
            "role": "assistant",
            "content": [block_to_dict(b) for b in message.content],
            "api": message.api,
            "provider": message.provider,
            "model": message.model,
            "stop_reason": message.stop_reason,
            "timestamp": message.timestamp,
        }
        usage = usage_to_dict(message.usage)
        if usage:
            out["usage"] = usage
        for name in ("error_message", "error_kind", "retry_after", "response_id"):
            value = getattr(message, name)
            if value is not None:
                out[name] = value
        return out
    out = {
        "role": "tool_result",
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
        "content": [block_to_dict(b) for b in message.content],
        "timestamp": message.timestamp,
    }
    if message.is_error:
        out["is_error"] = True
    if message.details is not None:
        out["details"] = message.details
    return out


def message_to_json(message: Message) -> str:
    """Compact JSON text of a message (what the ledger stores)."""
    return json.dumps(message_to_dict(message), separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- decode


def _req(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise MessageFormatError(f"{where}: missing field {key!r}")
    value = data[key]
    if kind is float and isinstance(value, int):
        return float(value)
    if not isinstance(value, kind):
        raise MessageFormatError(f"{where}: field {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def block_from_dict(data: Any, where: str = "content block") -> ContentBlock:
    """Decode one content block; raises :class:`MessageFormatError` on a bad shape."""
    if not isinstance(data, dict):
        raise MessageFormatError(f"{where}: expected an object, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "text":
        return TextContent(_req(data, "text", str, where), data.get("signature"))
    if kind == "thinking":
        return ThinkingContent(
            _req(data, "thinking", str, where), data.get("signature"), bool(data.get("redacted", False))
        )
    if kind == "image":
        return ImageContent(_req(data, "data", str, where), _req(data, "mime_type", str, where))
    if kind == "tool_call":
        return ToolCall(
            _req(data, "id", str, where),
            _req(data, "name", str, where),
            _req(data, "arguments", dict, where),
            data.get("raw_arguments"),
            data.get("thought_signature"),
        )
    raise MessageFormatError(f"{where}: unknown block type {kind!r} (known: text, thinking, image, tool_call)")


def usage_from_dict(data: Any) -> Usage:
    """Decode usage written by :func:`usage_to_dict`."""
    if not isinstance(data, dict):
        raise MessageFormatError(f"usage: expected an object, got {type(data).__name__}")
    cost_data = data.get("cost") or {}
    cost = Cost(**{k: float(v) for k, v in cost_data.items() if k in _COST_FIELDS})
    counts = {k: int(v) for k, v in data.items() if k in _USAGE_FIELDS}
    return Usage(**counts, cost=cost, estimated=data.get("estimated") is True)


_USAGE_FIELDS = frozenset(f.name for f in fields(Usage)) - {"cost", "estimated"}
_COST_FIELDS = frozenset(f.name for f in fields(Cost))


def _user_blocks(items: Any, where: str) -> list[UserContent]:
    if not isinstance(items, list):
        raise MessageFormatError(f"{where}: 'content' must be a list")
    blocks = [block_from_dict(b, where) for b in items]
    for block in blocks:
        if not isinstance(block, TextContent | ImageContent):
            raise MessageFormatError(f"{where}: a {block.type} block is not allowed here")
    return cast(list[UserContent], blocks)


def message_from_dict(data: Any) -> Message:
    """Decode a message written by :func:`message_to_dict`."""
    if not isinstance(data, dict):
        raise MessageFormatError(f"message: expected an object, got {type(data).__name__}")
    role = data.get("role")
    timestamp = int(data.get("timestamp", 0))
    if role == "user":
        content = data.get("content")
        if isinstance(content, str):
            return UserMessage(content, timestamp)
        return UserMessage(_user_blocks(content, "user message"), timestamp)
    if role == "assistant":
        where = "assistant message"
        blocks = [block_from_dict(b, where) for b in _req(data, "content", list, where)]
        if any(isinstance(b, ImageContent) for b in blocks):
            raise MessageFormatError(f"{where}: an image block is not allowed here")
        return AssistantMessage(
            content=cast(list[AssistantContent], blocks),
            api=str(data.get("api", "")),
            provider=str(data.get("provider", "")),
            model=str(data.get("model", "")),
            usage=usage_from_dict(data.get("usage") or {}),
            stop_reason=data.get("stop_reason", "stop"),
            error_message=data.get("error_message"),
            error_kind=data.get("error_kind"),
            retry_after=data.get("retry_after"),
            response_id=data.get("response_id"),
            timestamp=timestamp,
        )
    if role == "tool_result":
        where = "tool result"
        return ToolResultMessage(
            tool_call_id=_req(data, "tool_call_id", str, where),
            tool_name=_req(data, "tool_name", str, where),
            content=_user_blocks(data.get("content"), where),
            is_error=bool(data.get("is_error", False)),
            details=data.get("details"),
            timestamp=timestamp,
        )
    raise MessageFormatError(f"message: unknown role {role!r} (known: user, assistant, tool_result)")


def _parse_json(text: str, what: str) -> Any:
    """``json.loads`` whose failure is a :class:`MessageFormatError` naming ``what`` and where the text broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MessageFormatError(f"{what}: not valid JSON ({exc.msg} at char {exc.pos})") from exc


def message_from_json(text: str) -> Message:
    """Decode a message from JSON text; raises :class:`MessageFormatError` on bad input."""
    return message_from_dict(_parse_json(text, "message"))


def model_to_dict(model: Model) -> dict[str, Any]:
    """Encode a model (headers as an object)."""
    out: dict[str, Any] = {f.name: getattr(model, f.name) for f in fields(Model)}
    out["headers"] = dict(model.headers)
    return out


def model_from_dict(data: Any) -> Model:
    """Decode a model; unknown keys are an error naming them."""
    if not isinstance(data, dict):
        raise MessageFormatError(f"model: expected an object, got {type(data).__name__}")
    known = {f.name for f in fields(Model)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise MessageFormatError(f"model: unknown field(s) {', '.join(unknown)}")
    for key in ("id", "provider", "api"):
        if not isinstance(data.get(key), str):
            raise MessageFormatError(f"model: field {key!r} must be a string")
    values = dict(data)
    values["headers"] = tuple(dict(values.get("headers") or {}).items())  # keep the order: Model equality sees it
    return Model(**values)


def model_to_json(model: Model) -> str:
    """Compact JSON text of a model."""
    return json.dumps(model_to_dict(model), separators=(",", ":"), ensure_ascii=False)


def model_from_json(text: str) -> Model:
    """Decode a model from JSON text; raises :class:`MessageFormatError` on bad input."""
    return model_from_dict(_parse_json(text, "model"))


# --------------------------------------------------------------------------- stream events

_EVENT_TYPES: dict[str, type[Any]] = {
    "start": events.StartEvent,
    "text_start": events.TextStartEvent,
    "text_delta": events.TextDeltaEvent,
    "text_end": events.TextEndEvent,
    "thinking_start": events.ThinkingStartEvent,
    "thinking_delta": events.ThinkingDeltaEvent,
    "thinking_end": events.ThinkingEndEvent,
    "toolcall_start": events.ToolCallStartEvent,
    "toolcall_delta": events.ToolCallDeltaEvent,
    "toolcall_end": events.ToolCallEndEvent,
    "done": events.DoneEvent,
    "error": events.ErrorEvent,
}


def event_to_dict(event: AssistantMessageEvent) -> dict[str, Any]:
    """Encode a stream event (for relaying a stream over a wire or recording it); messages and blocks nested."""
    out: dict[str, Any] = {}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, AssistantMessage):
            value = message_to_dict(value)
        elif isinstance(value, TextContent | ThinkingContent | ToolCall):
            value = block_to_dict(value)
        out[f.name] = value
    return out


def event_from_dict(data: Any) -> AssistantMessageEvent:
    """Decode an event written by :func:`event_to_dict`; raises :class:`MessageFormatError` on a bad shape."""
    if not isinstance(data, dict):
        raise MessageFormatError(f"event: expected an object, got {type(data).__name__}")
    types = _EVENT_TYPES
    cls = types.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise MessageFormatError(f"event: unknown type {data.get('type')!r} (known: {', '.join(types)})")
    where = f"{data['type']} event"
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "type":
            continue
        if f.name not in data:
            raise MessageFormatError(f"{where}: missing field {f.name!r}")
        value = data[f.name]
        if f.name in ("partial", "message", "error"):
            value = message_from_dict(value)
            if not isinstance(value, AssistantMessage):
                raise MessageFormatError(f"{where}: field {f.name!r} must be an assistant message")
        elif f.name in ("content", "tool_call") and isinstance(value, dict):
            value = block_from_dict(value, where)
        values[f.name] = value
    return cast(AssistantMessageEvent, cls(**values))


def event_to_json(event: AssistantMessageEvent) -> str:
    """Compact JSON text of a stream event."""
    return json.dumps(event_to_dict(event), separators=(",", ":"), ensure_ascii=False)


def event_from_json(text: str) -> AssistantMessageEvent:
    """Decode a stream event from JSON text; raises :class:`MessageFormatError` on bad input."""
    return event_from_dict(_parse_json(text, "event"))
