"""OpenAI chat-completions wire shapes: SSE chunks, the non-stream JSON, and request → Context."""

from __future__ import annotations

import json
import time
from typing import Any

from nexus.llm import (
    AssistantContent,
    AssistantMessage,
    Context,
    Message,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)
from nexus.testing import _chunks
from nexus.testing.steps import Reply, TextPart, ThinkingPart

DONE = b"data: [DONE]\n\n"
_FINISH = {"stop": "stop", "length": "length", "tool_use": "tool_calls"}


def frame(obj: dict[str, Any]) -> bytes:
    """One SSE event as OpenAI sends it (``data:`` line only)."""
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def usage_for(reply: Reply, body: dict[str, Any]) -> Usage:
    """The reply's scripted usage, or the chars/4 estimate of the request and the reply."""
    if reply.usage is not None:
        return reply.usage
    sent = json.dumps([body.get("messages"), body.get("tools")], ensure_ascii=False)
    return Usage(input=_chunks.estimate_tokens(len(sent)), output=_chunks.estimate_tokens(_chunks.reply_chars(reply)))


def _usage_json(usage: Usage, reply: Reply) -> dict[str, Any]:
    reasoning = sum(_chunks.estimate_tokens(len(p.thinking)) for p in reply.parts if isinstance(p, ThinkingPart))
    prompt = usage.input + usage.cache_read  # OpenAI counts cached tokens inside prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning or reasoning},
    }


def stream_frames(
    reply: Reply, body: dict[str, Any], chunk: int, call_id_prefix: str, *, usage: bool = True
) -> list[bytes]:
    """Every SSE frame of a streamed response, ``[DONE]`` included.

    The usage chunk is sent when the request asks for it and ``usage`` is True; False acts
    like llama.cpp's server, which never sends one.
    """
    base = {"id": f"chatcmpl-{call_id_prefix}", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = str(body.get("model", "fake-model"))

    def chunk_frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return frame({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    frames = [chunk_frame({"role": "assistant", "content": ""})]
    tool_index = 0
    for n, part in enumerate(reply.parts):
        if isinstance(part, TextPart):
            frames += [chunk_frame({"content": piece}) for piece in _chunks.pieces(part.text, chunk)]
        elif isinstance(part, ThinkingPart):
            # OpenAI-compatible reasoning servers (DeepSeek, vLLM, llama.cpp) stream reasoning_content
            frames += [chunk_frame({"reasoning_content": piece}) for piece in _chunks.pieces(part.thinking, chunk)]
        else:
            head = {"index": tool_index, "id": part.id or f"call_{call_id_prefix}_{n}", "type": "function"}
            frames.append(chunk_frame({"tool_calls": [{**head, "function": {"name": part.name, "arguments": ""}}]}))
            for piece in _chunks.pieces(_chunks.arguments_json(part.arguments), chunk):
                frames.append(chunk_frame({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]}))
            tool_index += 1
    frames.append(chunk_frame({}, _FINISH[reply.effective_stop_reason]))
    options = body.get("stream_options")
    if usage and isinstance(options, dict) and options.get("include_usage"):
        frames.append(frame({**base, "choices": [], "usage": _usage_json(usage_for(reply, body), reply)}))
    frames.append(DONE)
    return frames


def completion_json(reply: Reply, body: dict[str, Any], call_id_prefix: str, *, usage: bool = True) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object (without ``usage`` when ``usage`` is False)."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    texts = [p.text for p in reply.parts if isinstance(p, TextPart)]
    if texts:
        message["content"] = "".join(texts)
    thoughts = [p.thinking for p in reply.parts if isinstance(p, ThinkingPart)]
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    calls = [
        {
            "id": p.id or f"call_{call_id_prefix}_{n}",
            "type": "function",
            "function": {"name": p.name, "arguments": _chunks.arguments_json(p.arguments)},
        }
        for n, p in enumerate(reply.parts)
        if not isinstance(p, TextPart | ThinkingPart)
    ]
    if calls:
        message["tool_calls"] = calls
    out: dict[str, Any] = {
        "id": f"chatcmpl-{call_id_prefix}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "fake-model")),
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _FINISH[reply.effective_stop_reason]}
        ],
    }
    if usage:
        out["usage"] = _usage_json(usage_for(reply, body), reply)
    return out


# --------------------------------------------------------------------------- request → Context


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _assistant(item: dict[str, Any]) -> AssistantMessage:
    blocks: list[AssistantContent] = []
    if _text_of(item.get("content")):
        blocks.append(TextContent(_text_of(item.get("content"))))
    for call in item.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = str(function.get("arguments") or "{}")
        try:
            args = json.loads(raw)
        except ValueError:
            args = {}
        blocks.append(
            ToolCall(str(call.get("id", "")), str(function.get("name", "")), args if isinstance(args, dict) else {})
        )
    return AssistantMessage(content=blocks, api="openai-completions")


def context_from_body(body: dict[str, Any]) -> Context:
    """Best-effort :class:`Context` of a chat-completions request (for ``from_context`` steps)."""
    context = Context()
    messages: list[Message] = []
    for item in body.get("messages") or []:
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        if role in ("system", "developer"):
            context.system_prompt += _text_of(item.get("content"))
        elif role == "user":
            user_blocks: list[UserContent] = [TextContent(_text_of(item.get("content")))]
            messages.append(UserMessage(user_blocks))
        elif role == "assistant":
            messages.append(_assistant(item))
        elif role == "tool":
            result: list[UserContent] = [TextContent(_text_of(item.get("content")))]
            messages.append(ToolResultMessage(str(item.get("tool_call_id", "")), "", result))
    context.messages = messages
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            context.tools.append(
                Tool(
                    str(function.get("name", "")),
                    str(function.get("description", "")),
                    function.get("parameters") or {},
                )
            )
    return context
