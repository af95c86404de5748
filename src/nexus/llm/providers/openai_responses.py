"""OpenAI Responses API (``/responses``) over SSE, stateless (``store: false``).

Reasoning runs with ``reasoning.effort`` and ``summary: auto``; the encrypted reasoning
item is kept in the thinking block's ``signature`` (as JSON) so that the next call to
the same model can send it back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from nexus.llm._replay import prepare_messages, same_model
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
    output_with_reasoning,
    refusal_failure,
    run_stream,
)
from nexus.llm.providers._tools import finish_tool_call, mark_incomplete
from nexus.llm.providers.openai_completions import reasoning_effort
from nexus.llm.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
    apply_cost,
)


def stream(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one Responses API call; ends with exactly one ``done`` or ``error`` event."""
    return run_stream(_SPEC, model, context, options)


PARAGRAPH = "\n\n"
"""Between two summary parts of one reasoning item, and before the text of a second output message."""


def _responses_tool_id(raw: str) -> str:
    return raw if 0 < len(raw) <= 64 else (raw or "call")[:64]


class _Spec:
    def build_request(
        self, model: Model, context: Context, options: StreamOptions, api_key: str | None, base_url: str
    ) -> Request:
        headers = {"content-type": "application/json", "accept": "text/event-stream", **dict(model.headers)}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return Request(f"{base_url}/responses", headers, build_payload(model, context, options))

    def decoder(self, model: Model, output: AssistantMessage) -> _Decoder:
        return _Decoder(model, output)


_SPEC = _Spec()


def build_payload(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body for ``/responses`` (exposed for tests and request inspection)."""
    payload: dict[str, Any] = {"model": model.id, "input": encode_input(model, context), "stream": True}
    payload["store"] = False
    if context.system_prompt:
        payload["instructions"] = context.system_prompt
    if options.max_tokens is not None:
        payload["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        payload["temperature"] = options.temperature
    if options.thinking != "off" and model.reasoning:
        payload["reasoning"] = {"effort": reasoning_effort(model, options.thinking), "summary": "auto"}
        payload["include"] = ["reasoning.encrypted_content"]
    if context.tools:
        payload["tools"] = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
            for t in context.tools
        ]
    choice = options.tool_choice
    if not context.tools:
        pass  # no tools, no tool_choice (as for chat completions)
    elif choice in ("auto", "none", "required"):
        payload["tool_choice"] = choice
    elif choice:
        payload["tool_choice"] = {"type": "function", "name": choice}
    if options.session_id:
        payload["prompt_cache_key"] = options.session_id
    return payload


def encode_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """Context → Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    for msg in prepare_messages(context.messages, model, _responses_tool_id):
        if isinstance(msg, UserMessage):
            items.append({"role": "user", "content": _user_parts(msg.content)})
        elif isinstance(msg, AssistantMessage):
            items.extend(_assistant_items(msg, same_model(msg, model)))
        else:
            images = [b for b in msg.content if isinstance(b, ImageContent)]
            items.append({"type": "function_call_output", "call_id": msg.tool_call_id, "output": msg.text or ""})
            if images:
                items.append({"role": "user", "content": _user_parts(images)})
    return items


def _user_parts(content: str | list[TextContent | ImageContent] | list[ImageContent]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [
        {"type": "input_text", "text": b.text}
        if isinstance(b, TextContent)
        else {"type": "input_image", "image_url": f"data:{b.mime_type};base64,{b.data}"}
        for b in content
    ]


def _assistant_items(msg: AssistantMessage, same: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    seen_text = False
    for b in msg.content:
        if isinstance(b, ThinkingContent):
            if same and b.signature:
                try:
                    items.append(json.loads(b.signature))
                except ValueError:
                    pass
        elif isinstance(b, TextContent):
            # the decoder put a blank line before the text of every output message after the first
            text = b.text[len(PARAGRAPH) :] if seen_text and b.text.startswith(PARAGRAPH) else b.text
            if text:
                seen_text = True
                items.append({"role": "assistant", "content": [{"type": "output_text", "text": text}]})
        else:
            arguments = b.raw_arguments if b.raw_arguments is not None else json.dumps(b.arguments)
            items.append({"type": "function_call", "call_id": b.id, "name": b.name, "arguments": arguments})
    return items


class _Decoder:
    """Responses stream events → stream events."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.output = output
        self.finished = False
        # output_index -> (content index, block, argument parts)
        self._items: dict[int, tuple[int, TextContent | ThinkingContent | ToolCall, list[str]]] = {}
        self._summary_part: dict[int, int] = {}  # output_index -> summary_index of the last summary delta
        self._refusal: list[str] = []  # ``response.refusal.delta`` pieces: why the model declined

    def handle(self, name: str | None, data: str) -> list[AssistantMessageEvent]:
        try:
            event = json.loads(data)
        except ValueError:
            raise StreamFailure("unknown", f"malformed SSE data from provider: {excerpt(data)}") from None
        if not isinstance(event, dict):
            raise StreamFailure("unknown", f"unexpected SSE data from provider: {excerpt(data)}")
        kind = event.get("type") or name or ""
        if kind == "response.output_text.delta":
            return self._text_delta(event)
        if kind == "response.function_call_arguments.delta":
            entry = self._items.get(int(event.get("output_index", -1)))
            piece = str(event.get("delta") or "")
            if entry is not None and isinstance(entry[1], ToolCall) and piece:
                entry[2].append(piece)
                return [ToolCallDeltaEvent(entry[0], piece, self.output)]
            return []
        if kind == "response.reasoning_summary_text.delta":
            return self._thinking_delta(event)
        if kind == "response.refusal.delta":
            self._refusal.append(str(event.get("delta") or ""))
            return []
        if kind == "response.output_item.added":
            return self._item_added(int(event.get("output_index", 0)), event.get("item") or {})
        if kind == "response.output_item.done":
            return self._item_done(int(event.get("output_index", 0)), event.get("item") or {})
        if kind == "response.created":
            self.output.response_id = (event.get("response") or {}).get("id")
        elif kind in ("response.completed", "response.incomplete"):
            self._completed(event.get("response") or {})
        elif kind == "response.failed":
            error = (event.get("response") or {}).get("error") or {}
            raise _failure(error)
        elif kind == "error":
            nested = event.get("error")  # real streams nest it; the reference documents it flat
            raise _failure(nested if isinstance(nested, dict) else event)
        return []

    def _item_added(self, index: int, item: dict[str, Any]) -> list[AssistantMessageEvent]:
        kind = item.get("type")
        position = len(self.output.content)
        block: TextContent | ThinkingContent | ToolCall
        if kind == "message":
            block = TextContent("")
            event: AssistantMessageEvent = TextStartEvent(position, self.output)
        elif kind == "reasoning":
            block = ThinkingContent("")
            event = ThinkingStartEvent(position, self.output)
        elif kind == "function_call":
            call_id = str(item.get("call_id") or item.get("id") or f"call_{index}")
            block = ToolCall(id=call_id, name=str(item.get("name") or ""), arguments={})
            event = ToolCallStartEvent(position, self.output)
        else:
            return []
        self.output.content.append(block)
        self._items[index] = (position, block, [])
        return [event]

    def _text_delta(self, event: dict[str, Any]) -> list[AssistantMessageEvent]:
        entry = self._items.get(int(event.get("output_index", -1)))
        text = str(event.get("delta") or "")
        if entry is None or not isinstance(entry[1], TextContent) or not text:
            return []
        if not entry[1].text and self._text_before(entry[0]):
            text = PARAGRAPH + text  # a second output message (commentary, then final answer): keep them apart
        append_text(entry[1], text)
        return [TextDeltaEvent(entry[0], text, self.output)]

    def _text_before(self, position: int) -> bool:
        """Is there text in an earlier block (only asked at the first delta of a message)?"""
        return any(isinstance(b, TextContent) and b.text for b in self.output.content[:position])

    def _thinking_delta(self, event: dict[str, Any]) -> list[AssistantMessageEvent]:
        index = int(event.get("output_index", -1))
        entry = self._items.get(index)
        text = str(event.get("delta") or "")
        if entry is None or not isinstance(entry[1], ThinkingContent) or not text:
            return []
        part = event.get("summary_index", 0)
        if self._summary_part.get(index, part) != part and entry[1].thinking:
            text = PARAGRAPH + text  # a new summary part: a blank line, as the parts are separate paragraphs
        self._summary_part[index] = part
        append_thinking(entry[1], text)
        return [ThinkingDeltaEvent(entry[0], text, self.output)]

    def _item_done(self, index: int, item: dict[str, Any]) -> list[AssistantMessageEvent]:
        entry = self._items.pop(index, None)
        if entry is None:
            return []
        position, block, parts = entry
        if isinstance(block, TextContent):
            if not self._refusal:  # a refusal part that came without its deltas
                content = item.get("content") or []
                refused = [c for c in content if isinstance(c, dict) and c.get("type") == "refusal"]
                self._refusal = [str(c.get("refusal") or "") for c in refused]
            return [TextEndEvent(position, block.text, self.output)]
        if isinstance(block, ThinkingContent):
            summary = _summary_text(item.get("summary"))
            if summary:  # the item's own parts are authoritative (and fill in for missed deltas)
                block.thinking = summary
            if item.get("encrypted_content"):
                block.signature = json.dumps(item, separators=(",", ":"))
            return [ThinkingEndEvent(position, block, self.output)]
        final = item.get("arguments")
        finish_tool_call(block, final if isinstance(final, str) else "".join(parts))
        return [ToolCallEndEvent(position, block, self.output)]

    def _completed(self, response: dict[str, Any]) -> None:
        self.finished = True
        usage = response.get("usage") or {}
        cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
        prompt = int(usage.get("input_tokens") or 0)
        u = self.output.usage
        u.input = max(0, prompt - cached)
        u.cache_read = cached
        u.reasoning = int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0)
        u.output = output_with_reasoning(
            int(usage.get("output_tokens") or 0), u.reasoning, prompt, usage.get("total_tokens")
        )
        apply_cost(self.model, u)
        status = response.get("status")
        reason = (response.get("incomplete_details") or {}).get("reason")
        if status == "incomplete" and reason == "content_filter":
            self.output.stop_reason = "error"
            self.output.error_message = "the provider stopped the response: content_filter"
        elif status == "incomplete":
            self.output.stop_reason = "length"
        elif any(isinstance(b, ToolCall) for b in self.output.content):
            self.output.stop_reason = "tool_use"
        else:
            self.output.stop_reason = "stop"

    def complete(self) -> bool:
        return self.finished

    def finish(self) -> list[AssistantMessageEvent]:
        if self._refusal or self.output.stop_reason == "error":
            raise refusal_failure("".join(self._refusal), filtered=not self._refusal)
        events: list[AssistantMessageEvent] = []
        for index in list(self._items):
            _, block, parts = self._items[index]
            if isinstance(block, ToolCall):  # no output_item.done: its arguments never finished
                del self._items[index]
                mark_incomplete(block, "".join(parts))
            else:
                events.extend(self._item_done(index, {}))
        return events

    def settle(self) -> None:
        for _, block, parts in self._items.values():
            if isinstance(block, ToolCall):
                mark_incomplete(block, "".join(parts))


def _summary_text(summary: Any) -> str:
    """A reasoning item's summary parts, one paragraph each."""
    if not isinstance(summary, list):
        return ""
    texts = [str(p.get("text") or "") for p in summary if isinstance(p, dict)]
    return PARAGRAPH.join(t for t in texts if t)


def _failure(error: dict[str, Any]) -> StreamFailure:
    code, message = error.get("code"), error.get("message")
    text = f"{code}: {message}" if code and message else str(message or code or "the response failed")
    return failure_from_text(text)
