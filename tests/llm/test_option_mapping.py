"""Every thinking level and every tool_choice, as each provider puts them on the wire (request bodies)."""

from __future__ import annotations

from typing import Any

import pytest

from nexus.llm import Context, Model, StreamOptions, ThinkingLevel, Tool, UserMessage
from nexus.llm.providers import anthropic, openai_completions, openai_responses

TOOL = Tool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
WITH_TOOLS = Context(messages=[UserMessage("q")], tools=[TOOL])
NO_TOOLS = Context(messages=[UserMessage("q")])

CLAUDE = Model(
    id="claude-sonnet-4-5", provider="anthropic", api="anthropic-messages", max_tokens=64_000, reasoning=True
)
O3 = Model(id="o3", provider="openai", api="openai-completions", reasoning=True)
GPT5 = Model(id="gpt-5", provider="openai", api="openai-completions", reasoning=True)
PLAIN = Model(id="gpt-4o", provider="openai", api="openai-completions", reasoning=False)


def _anthropic(model: Model, ctx: Context, **kw: Any) -> dict[str, Any]:
    return anthropic.build_payload(model, ctx, StreamOptions(**kw))


def _chat(model: Model, ctx: Context, **kw: Any) -> dict[str, Any]:
    return openai_completions.build_payload(model, ctx, StreamOptions(**kw))


def _responses(model: Model, ctx: Context, **kw: Any) -> dict[str, Any]:
    return openai_responses.build_payload(model, ctx, StreamOptions(**kw))


@pytest.mark.parametrize(
    ("level", "budget"), [("off", None), ("minimal", 1024), ("low", 2048), ("medium", 8192), ("high", 16384)]
)
def test_anthropic_thinking_levels(level: ThinkingLevel, budget: int | None) -> None:
    body = _anthropic(CLAUDE, NO_TOOLS, thinking=level, max_tokens=1000)
    if budget is None:
        assert "thinking" not in body and body["max_tokens"] == 1000
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] == 1000 + budget


@pytest.mark.parametrize(
    ("level", "o3", "gpt5"),
    [
        ("off", None, None),
        ("minimal", "low", "minimal"),
        ("low", "low", "low"),
        ("medium", "medium", "medium"),
        ("high", "high", "high"),
    ],
)
def test_openai_thinking_levels(level: ThinkingLevel, o3: str | None, gpt5: str | None) -> None:
    assert _chat(O3, NO_TOOLS, thinking=level).get("reasoning_effort") == o3
    assert _chat(GPT5, NO_TOOLS, thinking=level).get("reasoning_effort") == gpt5
    # the Responses API takes the same efforts (o-series models have no "minimal" there either)
    for model, effort in ((O3, o3), (GPT5, gpt5)):
        body = _responses(model, NO_TOOLS, thinking=level)
        assert body.get("reasoning", {}).get("effort") == effort
        assert ("include" in body) == (effort is not None)


def test_thinking_is_not_sent_to_models_without_reasoning() -> None:
    assert "reasoning_effort" not in _chat(PLAIN, NO_TOOLS, thinking="high")
    assert "reasoning" not in _responses(PLAIN, NO_TOOLS, thinking="high")
    plain_claude = Model(id="claude-3-5-haiku", provider="anthropic", api="anthropic-messages", reasoning=False)
    assert "thinking" not in _anthropic(plain_claude, NO_TOOLS, thinking="high")


@pytest.mark.parametrize(
    ("choice", "anthropic_wire", "chat_wire", "responses_wire"),
    [
        (None, None, None, None),
        ("auto", {"type": "auto"}, "auto", "auto"),
        ("none", {"type": "none"}, "none", "none"),
        ("required", {"type": "any"}, "required", "required"),
        (
            "read",
            {"type": "tool", "name": "read"},
            {"type": "function", "function": {"name": "read"}},
            {"type": "function", "name": "read"},
        ),
    ],
)
def test_tool_choice_per_provider(choice: str | None, anthropic_wire: Any, chat_wire: Any, responses_wire: Any) -> None:
    assert _anthropic(CLAUDE, WITH_TOOLS, tool_choice=choice).get("tool_choice") == anthropic_wire
    assert _chat(PLAIN, WITH_TOOLS, tool_choice=choice).get("tool_choice") == chat_wire
    assert _responses(PLAIN, WITH_TOOLS, tool_choice=choice).get("tool_choice") == responses_wire
    # without tools no provider gets a tool_choice (OpenAI rejects it: "only allowed when tools are specified")
    assert "tool_choice" not in _anthropic(CLAUDE, NO_TOOLS, tool_choice=choice)
    assert "tool_choice" not in _chat(PLAIN, NO_TOOLS, tool_choice=choice)
    assert "tool_choice" not in _responses(PLAIN, NO_TOOLS, tool_choice=choice)


@pytest.mark.parametrize("choice", ["required", "read"])
def test_anthropic_forced_tool_choice_turns_thinking_off(choice: str) -> None:
    # the Messages API answers 400 "Thinking may not be enabled when tool_choice forces tool use"
    body = _anthropic(CLAUDE, WITH_TOOLS, tool_choice=choice, thinking="high", temperature=0.3)
    assert "thinking" not in body and body["temperature"] == 0.3
    assert body["tool_choice"]["type"] in ("any", "tool")
    kept = _anthropic(CLAUDE, WITH_TOOLS, tool_choice="auto", thinking="high")
    assert kept["thinking"]["type"] == "enabled"
