"""OpenAI chat completions (``/chat/completions``) over SSE: OpenAI and every compatible server.

Works against any OpenAI-compatible base URL (Ollama, vLLM, llama.cpp, LM Studio,
OpenRouter, Groq, Together, Gemini's compatibility endpoint …). Reasoning text that
compatible servers stream as ``reasoning_content`` / ``reasoning`` becomes thinking blocks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from nexus.llm._replay import openai_tool_id, prepare_messages
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
    output_with_reasoning,
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
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    apply_cost,
)

_FINISH: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "error",
}
_EFFORT = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}


def stream(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream one chat-completions call; ends with exactly one ``done`` or ``error`` event."""
    return run_stream(_SPEC, model, context, options)


# --------------------------------------------------------------------------- request


class _Spec:
    def build_request(
        self, model: Model, context: Context, options: StreamOptions, api_key: str | None, base_url: str
    ) -> Request:
        return Request(
            url=f"{base_url}/chat/completions",
            headers=_headers(model, api_key),
            payload=build_payload(model, context, options),
        )

    def decoder(self, model: Model, output: AssistantMessage) -> _Decoder:
        return _Decoder(model, output)


_SPEC = _Spec()


def _headers(model: Model, api_key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "text/event-stream", **dict(model.headers)}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def build_payload(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body for ``/chat/completions`` (exposed for tests and request inspection)."""
    payload: dict[str, Any] = {
        "model": model.id,
        "messages": encode_messages(model, context),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if options.max_tokens is not None:
        payload["max_completion_tokens" if model.provider == "openai" else "max_tokens"] = options.max_tokens
    if options.temperature is not None:
        payload["temperature"] = options.temperature
    if options.thinking != "off" and model.reasoning:
        payload["reasoning_effort"] = reasoning_effort(model, options.thinking)
    if context.tools:
        payload["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in context.tools
        ]
    choice = options.tool_choice
    if choice is not None and context.tools:  # OpenAI rejects tool_choice without tools
        if choice in ("auto", "none", "required"):
            payload["tool_choice"] = choice
        else:
            payload["tool_choice"] = {"type": "function", "function": {"name": choice}}
    if options.session_id and model.provider == "openai":
        payload["prompt_cache_key"] = options.session_id
    return payload


def reasoning_effort(model: Model, level: ThinkingLevel) -> str:
    """OpenAI's effort for ``level`` (not ``off``): ``minimal`` exists only for the gpt-5 family, others get ``low``."""
    effort = _EFFORT[level]
    if effort == "minimal" and not model.id.startswith("gpt-5"):
        effort = "low"
    return effort


def encode_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """Context → chat-completions ``messages`` (after the cross-provider replay transform)."""
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    pending_images: list[dict[str, Any]] = []
    for msg in prepare_messages(context.messages, model, openai_tool_id):
        if not isinstance(msg, ToolResultMessage) and pending_images:
            out.append({"role": "user", "content": pending_images})
            pending_images = []
        if isinstance(msg, UserMessage):
            out.append({"role": "user", "content": _user_content(msg.content)})
        elif isinstance(msg, AssistantMessage):
            encoded = _assistant(msg)
            if encoded is not None:
                out.append(encoded)
        else:
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.text or "(no output)"})
            images = [b for b in msg.content if isinstance(b, ImageContent)]
            if images:
                pending_images.append({"type": "text", "text": f"Images returned by tool {msg.tool_name}:"})
                pending_images.extend(_image_part(b) for b in images)
    if pending_images:
        out.append({"role": "user", "content": pending_images})
    return out


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}


def _user_content(content: str | list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": b.text} if isinstance(b, TextContent) else _image_part(b)
        for b in content
        if not isinstance(b, TextContent) or b.text
    ]


def _assistant(msg: AssistantMessage) -> dict[str, Any] | None:
    text = "".join(b.text for b in msg.content if isinstance(b, TextContent))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": _arguments_text(b)},
        }
        for b in msg.content
        if isinstance(b, ToolCall)
    ]
    if not text and not calls:
        return None
    encoded: dict[str, Any] = {"role": "assistant", "content": text}  # "" not null: llama.cpp rejects null
    if calls:
        encoded["tool_calls"] = calls
    return encoded


def _arguments_text(call: ToolCall) -> str:
    if call.raw_arguments is not None and not call.arguments:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


# --------------------------------------------------------------------------- response


class _Decoder:
    """chat.completion.chunk events → stream events."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.output = output
        self.finished = False
        self._saw_finish = False
        self._text: TextContent | None = None
        self._text_index = -1
        self._thinking: ThinkingContent | None = None
        self._thinking_index = -1
        self._calls: dict[int, tuple[int, ToolCall, list[str]]] = {}  # openai index -> (content index, call, parts)
        self._refusal: list[str] = []  # ``delta.refusal`` pieces: the model declined, this is why

    def handle(self, name: str | None, data: str) -> list[AssistantMessageEvent]:
        if data == "[DONE]":
            self.finished = True
            return []
        try:
            chunk = parse_data(data)
        except ValueError:
            raise StreamFailure("unknown", f"malformed SSE data from provider: {excerpt(data)}") from None
        if not isinstance(chunk, dict):
            raise StreamFailure("unknown", f"unexpected SSE data from provider: {excerpt(data)}")
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content and self._text is not None and len(delta) == 1:
                    # hot path: one more piece of the open text block
                    append_text(self._text, content)
                    events: list[AssistantMessageEvent] = [TextDeltaEvent(self._text_index, content, self.output)]
                else:
                    events = self._delta(delta)
            else:
                events = []
            reason = choice.get("finish_reason")
            if reason:
                self._finish_reason(reason)
                if reason == "content_filter":
                    self._refusal.append(_filtered(choice.get("content_filter_results")))
        elif "error" in chunk:
            raise self._stream_error(chunk["error"])
        else:
            events = []
        usage = chunk.get("usage")
        if usage:
            self._usage(usage)
        if chunk.get("id") and self.output.response_id is None:
            self.output.response_id = str(chunk["id"])
        return events

    def _delta(self, delta: dict[str, Any]) -> list[AssistantMessageEvent]:
        events: list[AssistantMessageEvent] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self._thinking is None:
                self._close_text(events)
                self._thinking = ThinkingContent("")
                self._thinking_index = len(self.output.content)
                self.output.content.append(self._thinking)
                events.append(ThinkingStartEvent(self._thinking_index, self.output))
            append_thinking(self._thinking, reasoning)
            events.append(ThinkingDeltaEvent(self._thinking_index, reasoning, self.output))
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self._text is None:
                self._close_thinking(events)
                self._text = TextContent("")
                self._text_index = len(self.output.content)
                self.output.content.append(self._text)
                events.append(TextStartEvent(self._text_index, self.output))
            append_text(self._text, content)
            events.append(TextDeltaEvent(self._text_index, content, self.output))
        for call in delta.get("tool_calls") or ():
            self._tool_delta(call, events)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._refusal.append(refusal)
        return events

    def _tool_delta(self, call: dict[str, Any], events: list[AssistantMessageEvent]) -> None:
        index = self._call_index(call)
        fn = call.get("function") or {}
        entry = self._calls.get(index)
        if entry is None:
            self._close_text(events)
            self._close_thinking(events)
            tool = ToolCall(id=str(call.get("id") or f"call_{index}"), name=str(fn.get("name") or ""), arguments={})
            entry = (len(self.output.content), tool, [])
            self._calls[index] = entry
            self.output.content.append(tool)
            events.append(ToolCallStartEvent(entry[0], self.output))
        elif fn.get("name") and not entry[1].name:
            entry[1].name = str(fn["name"])
        piece = fn.get("arguments")
        if isinstance(piece, str) and piece:
            entry[2].append(piece)
            events.append(ToolCallDeltaEvent(entry[0], piece, self.output))

    def _call_index(self, call: dict[str, Any]) -> int:
        # Some servers (Mistral, Gemini's compatibility endpoint) omit "index" and send each
        # call whole; a new id then means a new call.
        raw = call.get("index")
        if isinstance(raw, int):
            return raw
        call_id = call.get("id")
        if call_id is None:
            return max(self._calls, default=0)  # a continuation of the latest call
        for index, (_, known, _) in self._calls.items():
            if known.id == call_id:
                return index
        return len(self._calls)

    def _finish_reason(self, reason: str) -> None:
        self._saw_finish = True
        stop = _FINISH.get(reason, "stop")
        if stop == "error":
            self.output.error_message = f"the provider stopped the response: {reason}"
        self.output.stop_reason = stop
        if self.output.stop_reason == "stop" and self._calls:
            self.output.stop_reason = "tool_use"

    def _stream_error(self, error: Any) -> StreamFailure:
        message = error.get("message") if isinstance(error, dict) else error
        code = error.get("code") or error.get("type") if isinstance(error, dict) else None
        text = f"{code}: {message}" if code and str(code) not in str(message) else str(message)
        return failure_from_text(text)

    def _usage(self, usage: dict[str, Any]) -> None:
        prompt = int(usage.get("prompt_tokens") or 0)
        details = usage.get("prompt_tokens_details") or {}
        cached = int(details.get("cached_tokens") or 0)
        out_details = usage.get("completion_tokens_details") or {}
        u = self.output.usage
        u.input = max(0, prompt - cached)
        u.cache_read = cached
        u.reasoning = int(out_details.get("reasoning_tokens") or 0)
        u.output = output_with_reasoning(
            int(usage.get("completion_tokens") or 0), u.reasoning, prompt, usage.get("total_tokens")
        )
        apply_cost(self.model, u)

    def _close_text(self, events: list[AssistantMessageEvent]) -> None:
        if self._text is not None:
            events.append(TextEndEvent(self._text_index, self._text.text, self.output))
            self._text = None

    def _close_thinking(self, events: list[AssistantMessageEvent]) -> None:
        if self._thinking is not None:
            events.append(ThinkingEndEvent(self._thinking_index, self._thinking, self.output))
            self._thinking = None

    def finish(self) -> list[AssistantMessageEvent]:
        if not self._saw_finish:
            # [DONE] without a finish_reason: trust it only if something arrived
            self.output.stop_reason = "tool_use" if self._calls else "stop"
        if self._refusal or self.output.stop_reason == "error":
            raise refusal_failure("".join(self._refusal), filtered=self.output.stop_reason == "error")
        events: list[AssistantMessageEvent] = []
        self._close_thinking(events)
        self._close_text(events)
        for index, call, parts in self._calls.values():
            finish_tool_call(call, "".join(parts))
            events.append(ToolCallEndEvent(index, call, self.output))
        self._calls = {}
        return events

    def settle(self) -> None:
        for _, call, parts in self._calls.values():
            mark_incomplete(call, "".join(parts))

    def complete(self) -> bool:
        """True once a finish_reason arrived (some servers omit ``[DONE]``)."""
        return self.finished or self._saw_finish


def _filtered(results: Any) -> str:
    """Azure's ``content_filter_results`` of the stopped choice → ``violence (high)``: what was filtered."""
    if not isinstance(results, dict):
        return ""
    found = []
    for category, verdict in results.items():
        if isinstance(verdict, dict) and verdict.get("filtered"):
            severity = verdict.get("severity")
            found.append(f"{category} ({severity})" if severity else str(category))
    return ", ".join(found)
