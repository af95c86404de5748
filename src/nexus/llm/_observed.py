"""A model call as a span and as metrics (OpenTelemetry GenAI conventions), around a provider's stream.

:func:`nexus.llm.stream` wraps a call in :func:`observed` only while telemetry is on; off,
the provider's iterator is returned untouched. One call is one span ``chat {model}`` (kind
client) — failover's attempts are separate calls, so a 429 and the retry that followed are two
spans. The span is not made current: it lives across the consumer's ``await``s, and nothing
runs inside it.

Message contents go on the span only with ``[telemetry] capture_content = true``
(``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages``, as the
conventions' JSON), redacted like every error text.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from nexus import telemetry
from nexus.llm.events import AssistantMessageEvent, DoneEvent, ErrorEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantMessage, Context, Message, Model, TextContent, ThinkingContent, ToolCall

_CONTENT_EVENTS = frozenset({"text_start", "text_delta", "thinking_start", "thinking_delta", "toolcall_start"})


async def observed(
    events: AsyncIterator[AssistantMessageEvent], model: Model, context: Context, options: StreamOptions | None
) -> AsyncIterator[AssistantMessageEvent]:
    """``events`` unchanged, timed and traced (see the module docstring)."""
    span = telemetry.start_span(f"chat {model.id}", kind="client", attributes=_request_attributes(model, options))
    if span.recording and telemetry.capture_content():
        _set_input(span, context)
    started = time.perf_counter()
    first: float | None = None
    final: AssistantMessage | None = None
    ended = False
    try:
        async for event in events:
            if first is None and event.type in _CONTENT_EVENTS:
                first = time.perf_counter() - started
            elif isinstance(event, (DoneEvent, ErrorEvent)):
                final = event.message if isinstance(event, DoneEvent) else event.error
                # ended before the last event is handed on: a consumer stops iterating there, and
                # this generator would be closed only when collected (after the run's span ended)
                _finish(span, model, final, time.perf_counter() - started, first)
                ended = True
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
        if not ended:  # cancelled or broken off mid-stream
            _finish(span, model, final, time.perf_counter() - started, first)


def _request_attributes(model: Model, options: StreamOptions | None) -> dict[str, Any]:
    from nexus.llm.keys import effective_base_url

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": model.provider,
        "gen_ai.request.model": model.id,
        "nexus.api": model.api,
    }
    if options is not None:
        attributes["gen_ai.request.max_tokens"] = options.max_tokens
        attributes["gen_ai.request.temperature"] = options.temperature
    url = effective_base_url(model, options)
    if url:
        parts = urlsplit(url)
        attributes["server.address"] = parts.hostname
        attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    return attributes


def _finish(
    span: telemetry.Span, model: Model, final: AssistantMessage | None, duration_s: float, first_s: float | None
) -> None:
    usage = final.usage if final is not None else None
    error_kind = _error_kind(final)
    metrics = telemetry.metrics()
    if metrics.enabled:
        metrics.model_call(
            model.provider,
            model.id,
            duration_s=duration_s,
            first_token_s=first_s,
            error_kind=error_kind,
            input_tokens=usage.input if usage else 0,
            output_tokens=usage.output if usage else 0,
            cache_read_tokens=usage.cache_read if usage else 0,
            cache_write_tokens=usage.cache_write if usage else 0,
            cost_usd=usage.cost.total if usage else 0.0,
        )
    if not span.recording:
        span.end()
        return
    if final is not None and usage is not None:
        span.set_attributes(
            {
                "gen_ai.response.model": final.model or None,
                "gen_ai.response.id": final.response_id,
                "gen_ai.response.finish_reasons": [final.stop_reason],
                "gen_ai.usage.input_tokens": usage.input + usage.cache_read + usage.cache_write,
                "gen_ai.usage.output_tokens": usage.output,
                "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
                "nexus.cost_usd": usage.cost.total,
                "nexus.usage_estimated": usage.estimated or None,
                "nexus.first_token_s": first_s,
            }
        )
        if telemetry.capture_content():
            span.set_attribute("gen_ai.output.messages", _json([_message(final, final.stop_reason)]))
    if error_kind is not None:
        span.fail(error_kind, final.error_message if final is not None else "the stream ended without a final event")
    span.end()


def _error_kind(final: AssistantMessage | None) -> str | None:
    """The call's error kind for ``error.type`` and the error metric (None: it did not fail; an abort is no failure)."""
    if final is None:
        return "unknown"
    return (final.error_kind or "unknown") if final.stop_reason == "error" else None


def _set_input(span: telemetry.Span, context: Context) -> None:
    if context.system_prompt:
        span.set_attribute("gen_ai.system_instructions", _json([{"type": "text", "content": context.system_prompt}]))
    span.set_attribute("gen_ai.input.messages", _json([_message(m) for m in context.messages]))


def _message(message: Message, finish_reason: str | None = None) -> dict[str, Any]:
    """One message in the GenAI conventions' JSON shape (``role`` and ``parts``)."""
    if message.role == "tool_result":
        text = "".join(getattr(part, "text", "") for part in message.content)
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message.tool_call_id, "response": text}]}
    if message.role == "user":
        content = message.content
        parts = [{"type": "text", "content": content}] if isinstance(content, str) else [_part(p) for p in content]
        return {"role": "user", "parts": parts}
    out: dict[str, Any] = {"role": "assistant", "parts": [_part(part) for part in message.content]}
    if finish_reason is not None:
        out["finish_reason"] = finish_reason
    return out


def _part(part: object) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"type": "text", "content": part.text}
    if isinstance(part, ThinkingContent):
        return {"type": "reasoning", "content": part.thinking}
    if isinstance(part, ToolCall):
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments}
    return {"type": "blob", "modality": "image", "mime_type": getattr(part, "mime_type", None)}  # no image bytes


def _json(value: object) -> str:
    from nexus.llm.redact import redact

    return redact(json.dumps(value, ensure_ascii=False, default=str))
