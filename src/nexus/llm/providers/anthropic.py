"""Anthropic Messages API (``/v1/messages``) over SSE.

Text, thinking (with signatures, and redacted thinking), tool use, images, prompt-cache
markers (``cache_control: ephemeral`` on the system prompt and on the last block of the
last user turn) and cache usage. Thinking levels map to ``budget_tokens``
1024/2048/8192/16384 (no temperature with thinking); the 4.6 models use adaptive thinking.
A forced ``tool_choice`` (``required`` or a tool name) turns thinking off for that call,
because the API rejects the two together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from nexus.llm._replay import anthropic_tool_id, prepare_messages
from nexus.llm._sse import parse_data
from nexus.llm.events import (
    AssistantMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.llm.options import StreamOptions
from nexus.llm.providers._common import (
    Request,
    StreamFailure,
    append_text,
    append_thinking,
    excerpt,
    failure_from_text,
    refusal_failure,
    run_stream,
)
from nexus.llm.providers._tools import finish_tool_call, mark_incomplete
from nexus.llm.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    apply_cost,
)

API_VERSION = "2023-06-01"
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
    "refusal": "error",
}
_EPHEMERAL = {"type": "ephemeral"}


def stream(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one Messages API call; ends with exactly one ``done`` or ``error`` event."""
    return run_stream(_SPEC, model, context, options)


class _Spec:
    def build_request(
        self, model: Model, context: Context, options: StreamOptions, api_key: str | None, base_url: str
    ) -> Request:
        url = f"{base_url}/messages" if base_url.endswith("/v1") else f"{base_url}/v1/messages"
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
            **dict(model.headers),
        }
        if api_key:
            headers["x-api-key"] = api_key
        return Request(url, headers, build_payload(model, context, options))

    def decoder(self, model: Model, output: AssistantMessage) -> _Decoder:
        return _Decoder(model, output)


_SPEC = _Spec()


# --------------------------------------------------------------------------- request


def build_payload(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body for ``/v1/messages`` (exposed for tests and request inspection)."""
    max_tokens = options.max_tokens or min(model.max_tokens, 32_000)
    payload: dict[str, Any] = {"model": model.id, "stream": True, "messages": encode_messages(model, context)}
    if context.system_prompt:
        payload["system"] = [{"type": "text", "text": context.system_prompt, "cache_control": _EPHEMERAL}]
    # Anthropic rejects thinking together with a forced tool choice (``any`` / ``tool``): the forced choice wins.
    forced = bool(context.tools) and options.tool_choice not in (None, "auto", "none")
    if options.thinking != "off" and model.reasoning and not forced:
        if _adaptive(model):
            payload["thinking"] = {"type": "adaptive"}
            payload["output_config"] = {"effort": "low" if options.thinking == "minimal" else options.thinking}
        else:
            budget = THINKING_BUDGETS[options.thinking]
            max_tokens = min(max_tokens + budget, model.max_tokens)
            if max_tokens <= budget:
                budget = max(1024, max_tokens - 1024)
            payload["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif options.temperature is not None:
        payload["temperature"] = options.temperature
    payload["max_tokens"] = max_tokens
    if context.tools:
        payload["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in context.tools
        ]
        choice = options.tool_choice
        if choice in ("auto", "none"):
            payload["tool_choice"] = {"type": choice}
        elif choice == "required":
            payload["tool_choice"] = {"type": "any"}
        elif choice:
            payload["tool_choice"] = {"type": "tool", "name": choice}
    return payload


def _adaptive(model: Model) -> bool:
    return "4-6" in model.id or "4.6" in model.id


def encode_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """Context → Messages API ``messages``: tool results merged into user turns, cache marker on the last."""
    out: list[dict[str, Any]] = []
    for msg in prepare_messages(context.messages, model, anthropic_tool_id):
        if isinstance(msg, UserMessage):
            blocks = _user_blocks(msg.content)
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif isinstance(msg, AssistantMessage):
            blocks = _assistant_blocks(msg)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        else:
            block = _tool_result(msg)
            last = out[-1] if out else None
            if last is not None and last["role"] == "user" and last["content"][0].get("type") == "tool_result":
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    for message in reversed(out):
        if message["role"] == "user":
            message["content"][-1] = {**message["content"][-1], "cache_control": _EPHEMERAL}
            break
    return out


def _image(block: ImageContent) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _user_blocks(content: str | list[TextContent | ImageContent]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [
        {"type": "text", "text": b.text} if isinstance(b, TextContent) else _image(b)
        for b in content
        if not isinstance(b, TextContent) or b.text
    ]


def _assistant_blocks(msg: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for b in msg.content:
        if isinstance(b, TextContent):
            if b.text:
                blocks.append({"type": "text", "text": b.text})
        elif isinstance(b, ThinkingContent):
            if b.redacted:
                blocks.append({"type": "redacted_thinking", "data": b.signature or ""})
            elif b.signature:
                blocks.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
            elif b.thinking:
                blocks.append({"type": "text", "text": b.thinking})  # unsigned thinking cannot be replayed as such
        else:
            blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.arguments})
    return blocks


def _tool_result(msg: ToolResultMessage) -> dict[str, Any]:
    content = [{"type": "text", "text": b.text} if isinstance(b, TextContent) else _image(b) for b in msg.content]
    content = [c for c in content if c.get("type") != "text" or c["text"]]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.tool_call_id}
    block["content"] = content or [{"type": "text", "text": "(no output)"}]
    if msg.is_error:
        block["is_error"] = True
    return block


# --------------------------------------------------------------------------- response


class _Decoder:
    """Messages API stream events → stream events."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.output = output
        self.finished = False
        self._stopped = False
        self._started = False
        self._refusal: StreamFailure | None = None
        # Anthropic block index -> (content index, block, tool-argument parts)
        self._blocks: dict[int, tuple[int, TextContent | ThinkingContent | ToolCall, list[str]]] = {}

    def handle(self, name: str | None, data: str) -> list[AssistantMessageEvent]:
        try:
            event = parse_data(data)
        except ValueError:
            raise StreamFailure("unknown", f"malformed SSE data from provider: {excerpt(data)}") from None
        if not isinstance(event, dict):
            raise StreamFailure("unknown", f"unexpected SSE data from provider: {excerpt(data)}")
        kind = event.get("type") or name
        if kind == "content_block_delta":
            entry = self._blocks.get(event.get("index", -1))
            delta = event.get("delta") or {}
            if entry is not None:
                return self._delta(entry, delta)
            return []
        if kind == "content_block_start":
            return self._start(int(event.get("index", 0)), event.get("content_block") or {})
        if kind == "content_block_stop":
            return self._stop(int(event.get("index", 0)))
        if kind == "message_start":
            if self._started:
                self._restart()
            self._started = True
            message = event.get("message") or {}
            self.output.response_id = message.get("id")
            self._usage(message.get("usage") or {})
        elif kind == "message_delta":
            body = event.get("delta") or {}
            reason = body.get("stop_reason")
            if reason:
                self._stop_reason(str(reason), body.get("stop_details"))
            self._usage(event.get("usage") or {})
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            raise _error(event.get("error"))
        return []

    def _start(self, index: int, block: dict[str, Any]) -> list[AssistantMessageEvent]:
        kind = block.get("type")
        position = len(self.output.content)
        new: TextContent | ThinkingContent | ToolCall
        if kind == "text":
            new = TextContent(str(block.get("text") or ""))
            event: AssistantMessageEvent = TextStartEvent(position, self.output)
        elif kind == "thinking":
            new = ThinkingContent(str(block.get("thinking") or ""))
            event = ThinkingStartEvent(position, self.output)
        elif kind == "redacted_thinking":
            new = ThinkingContent("", signature=str(block.get("data") or ""), redacted=True)
            event = ThinkingStartEvent(position, self.output)
        elif kind in ("tool_use", "server_tool_use"):
            new = ToolCall(id=str(block.get("id") or ""), name=str(block.get("name") or ""), arguments={})
            event = ToolCallStartEvent(position, self.output)
        else:
            return []  # block types we do not model (web search results …) are skipped
        self.output.content.append(new)
        self._blocks[index] = (position, new, [])
        return [event]

    def _delta(
        self, entry: tuple[int, TextContent | ThinkingContent | ToolCall, list[str]], delta: dict[str, Any]
    ) -> list[AssistantMessageEvent]:
        position, block, parts = entry
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(block, TextContent):
            text = delta.get("text") or ""
            append_text(block, text)
            return [TextDeltaEvent(position, text, self.output)]
        if kind == "thinking_delta" and isinstance(block, ThinkingContent):
            text = delta.get("thinking") or ""
            append_thinking(block, text)
            return [ThinkingDeltaEvent(position, text, self.output)]
        if kind == "signature_delta" and isinstance(block, ThinkingContent):
            block.signature = (block.signature or "") + str(delta.get("signature") or "")
        elif kind == "input_json_delta" and isinstance(block, ToolCall):
            piece = str(delta.get("partial_json") or "")
            if piece:
                parts.append(piece)
                return [ToolCallDeltaEvent(position, piece, self.output)]
        return []

    def _stop(self, index: int) -> list[AssistantMessageEvent]:
        entry = self._blocks.pop(index, None)
        if entry is None:
            return []
        position, block, parts = entry
        if isinstance(block, TextContent):
            return [TextEndEvent(position, block.text, self.output)]
        if isinstance(block, ThinkingContent):
            return [ThinkingEndEvent(position, block, self.output)]
        finish_tool_call(block, "".join(parts))
        return [ToolCallEndEvent(position, block, self.output)]

    def _restart(self) -> None:
        """A second ``message_start``: the provider (or a proxy's fallback) began the response again.

        Everything of the abandoned generation goes, finished or not: the new one sends its
        own blocks from index 0, and keeping the old ones would mix two answers (and run a
        tool call whose arguments were cut off). ``content`` is emptied in place, so
        ``partial`` stays the same object; the new blocks' indices start at 0 again.
        """
        self.output.content.clear()
        self._blocks.clear()
        self._stopped = False
        self._refusal = None
        self.output.stop_reason = "stop"
        self.output.error_message = None
        u = self.output.usage
        u.input = u.output = u.cache_read = u.cache_write = 0

    def _stop_reason(self, reason: str, details: Any = None) -> None:
        self._stopped = True
        stop = _STOP.get(reason, "stop")
        self.output.stop_reason = stop
        if reason == "refusal":  # the only reason that maps to "error"
            self._refusal = refusal_failure(_refusal_text(details))
            self.output.error_message = self._refusal.message

    def _usage(self, usage: dict[str, Any]) -> None:
        u = self.output.usage
        if usage.get("input_tokens") is not None:
            u.input = int(usage["input_tokens"])
        if usage.get("output_tokens") is not None:
            u.output = int(usage["output_tokens"])
        if usage.get("cache_read_input_tokens") is not None:
            u.cache_read = int(usage["cache_read_input_tokens"])
        if usage.get("cache_creation_input_tokens") is not None:
            u.cache_write = int(usage["cache_creation_input_tokens"])
        apply_cost(self.model, u)

    def complete(self) -> bool:
        return self.finished or self._stopped

    def finish(self) -> list[AssistantMessageEvent]:
        if self._refusal is not None:
            raise self._refusal
        events: list[AssistantMessageEvent] = []
        for index in list(self._blocks):
            _, block, parts = self._blocks[index]
            if isinstance(block, ToolCall):  # no content_block_stop: its arguments never finished
                del self._blocks[index]
                mark_incomplete(block, "".join(parts))
            else:
                events.extend(self._stop(index))
        return events

    def settle(self) -> None:
        for _, block, parts in self._blocks.values():
            if isinstance(block, ToolCall):
                mark_incomplete(block, "".join(parts))


def _refusal_text(details: Any) -> str:
    """``stop_details`` of a refusal → ``category: explanation`` (either may be missing)."""
    if not isinstance(details, dict):
        return ""
    category, explanation = details.get("category"), details.get("explanation")
    parts = [str(p) for p in (category, explanation) if p]
    return ": ".join(parts)


def _error(error: Any) -> StreamFailure:
    if isinstance(error, dict):
        kind, message = error.get("type"), error.get("message")
        text = f"{kind}: {message}" if kind and message else str(message or kind or error)
    else:
        text = str(error)
    return failure_from_text(text)
