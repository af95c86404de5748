"""Conversation → llama-cpp-python chat messages (OpenAI format, adapted to the chat template in use)."""

from __future__ import annotations

import json
from typing import Any

from nexus.llm._replay import openai_tool_id, prepare_messages
from nexus.llm.types import Context, Model, TextContent, ToolResultMessage, UserMessage

_DEFAULT_SYSTEM = "You are a helpful assistant."


def _text_of(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.text if isinstance(b, TextContent) else "[image omitted: text-only model]" for b in content)


def openai_messages(context: Context, model: Model) -> list[dict[str, Any]]:
    """The conversation in OpenAI chat format (assistant tool calls with content "", results as role tool)."""
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    for msg in prepare_messages(context.messages, model, openai_tool_id):
        if isinstance(msg, UserMessage):
            out.append({"role": "user", "content": _text_of(msg.content)})
        elif isinstance(msg, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id, "name": msg.tool_name, "content": msg.text})
        else:
            entry: dict[str, Any] = {"role": "assistant", "content": msg.text}
            calls = msg.tool_calls
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.raw_arguments or json.dumps(call.arguments)},
                    }
                    for call in calls
                ]
            out.append(entry)
    return out


def for_template(messages: list[dict[str, Any]], function_calling: bool) -> list[dict[str, Any]]:
    """Adapt OpenAI-format messages to what the chosen chat template can render."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg["role"] == "tool" and function_calling:
            out.append({"role": "user", "content": f"functions.{msg['name']} returned:\n{msg['content']}"})
        elif msg["role"] == "tool":
            out.append({"role": "tool", "content": msg["content"]})
        elif msg["role"] == "assistant" and not function_calling and msg.get("tool_calls"):
            calls = "\n".join(
                f"functions.{c['function']['name']}:\n{c['function']['arguments']}" for c in msg["tool_calls"]
            )
            out.append({"role": "assistant", "content": f"{msg['content']}\n{calls}".strip()})
        else:
            out.append(msg)
    if function_calling and (not out or out[0]["role"] != "system"):
        out.insert(0, {"role": "system", "content": _DEFAULT_SYSTEM})  # the tool list is rendered in it
    return out
