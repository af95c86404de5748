"""A tiny canned stream function for the agent tests (independent of nexus.testing).

Each response is a list of blocks (TextContent / ToolCall) or a callable that builds one
from the Context; the stream emits real start/text/toolcall/done events, honours
``options.signal`` between events, and can pause on an ``asyncio.Event`` so tests can
act (abort, steer) mid-stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus.agent import AgentEvent
from nexus.llm.events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from nexus.llm.options import StreamOptions
from nexus.llm.types import AssistantContent, AssistantMessage, Context, Model, TextContent, ToolCall

MODEL = Model(id="canned-1", provider="canned", api="canned")

Blocks = Sequence[AssistantContent]


def call(name: str, args: dict[str, object] | None = None, id: str | None = None, raw: str | None = None) -> ToolCall:
    return ToolCall(id or f"call_{name}", name, dict(args or {}), raw_arguments=raw)


@dataclass
class Canned:
    """Scripted responses; records every Context it was called with (as shallow copies)."""

    responses: list[Any]
    pause_after: dict[int, asyncio.Event] = field(default_factory=dict)  # response index -> gate after first delta
    contexts: list[Context] = field(default_factory=list)
    options: list[StreamOptions | None] = field(default_factory=list)

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncIterator[AssistantMessageEvent]:
        index = len(self.contexts)
        self.contexts.append(Context(context.system_prompt, list(context.messages), list(context.tools)))
        self.options.append(options)
        signal = options.signal if options else None
        spec = self.responses[index] if index < len(self.responses) else "no more canned responses"
        msg = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        if isinstance(spec, str):
            msg.stop_reason = "error"
            msg.error_message = spec
            yield ErrorEvent("error", msg)
            return
        blocks = spec(context) if callable(spec) else spec
        yield StartEvent(msg)
        for block in blocks:
            if signal is not None and signal.aborted:
                break
            i = len(msg.content)
            if isinstance(block, TextContent):
                msg.content.append(TextContent(""))
                yield TextStartEvent(i, msg)
                for piece in (block.text[: len(block.text) // 2], block.text[len(block.text) // 2 :]):
                    msg.content[i].text += piece  # type: ignore[union-attr]
                    yield TextDeltaEvent(i, piece, msg)
                    gate = self.pause_after.get(index)
                    if gate is not None:
                        await gate.wait()
                    if signal is not None and signal.aborted:
                        break
                yield TextEndEvent(i, block.text, msg)
            elif isinstance(block, ToolCall):
                msg.content.append(block)
                yield ToolCallStartEvent(i, msg)
                yield ToolCallEndEvent(i, block, msg)
        if signal is not None and signal.aborted:
            msg.stop_reason = "aborted"
            msg.error_message = "Request was aborted."
            yield ErrorEvent("aborted", msg)
            return
        msg.stop_reason = "tool_use" if msg.tool_calls else "stop"
        yield DoneEvent(msg.stop_reason, msg)


def text(t: str) -> list[AssistantContent]:
    return [TextContent(t)]


def types(events: Sequence[AgentEvent]) -> list[str]:
    """Event types, with message roles and tool-call ids so orders can be compared exactly."""
    out: list[str] = []
    for ev in events:
        label: str = ev.type
        message = getattr(ev, "message", None)
        if ev.type in ("message_start", "message_end") and message is not None:
            label += f":{message.role}"
        if ev.type.startswith("tool_execution"):
            label += f":{getattr(ev, 'tool_call_id', '')}"
        out.append(label)
    return out
