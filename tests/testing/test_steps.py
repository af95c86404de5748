"""Step constructors and JSON scripts: shapes, defaults and clear errors on bad input."""

from __future__ import annotations

import re

import pytest

from nexus.llm.types import Context, TextContent, ToolResultMessage, UserMessage
from nexus.testing import ScriptError, steps
from nexus.testing.steps import (
    Cut,
    HttpError,
    Malformed,
    Overflow,
    Reply,
    Stall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    cut,
    echo,
    from_context,
    http_error,
    last_user_text,
    malformed,
    overflow,
    reply,
    resolve,
    stall,
    steps_from_json,
    text,
    thinking,
    tool_call,
)


def test_single_part_constructors_are_whole_responses() -> None:
    assert text("hi") == Reply((TextPart("hi"),))
    assert thinking("hmm").parts == (ThinkingPart("hmm", "sig-scripted"),)
    call = tool_call("read", {"path": "a"}, id="c1")
    assert call.parts == (ToolCallPart("read", {"path": "a"}, "c1"),)
    assert call.effective_stop_reason == "tool_use"
    assert text("x").effective_stop_reason == "stop"


def test_reply_joins_parts_in_order_and_keeps_overrides() -> None:
    combined = reply(thinking("hmm"), text("hi"), tool_call("read", {"path": "a"}), stop_reason="length")
    assert [type(p).__name__ for p in combined.parts] == ["ThinkingPart", "TextPart", "ToolCallPart"]
    assert combined.effective_stop_reason == "length"
    assert reply(TextPart("a"), text("b")).parts == (TextPart("a"), TextPart("b"))


def test_reply_rejects_non_parts() -> None:
    with pytest.raises(ScriptError, match=r"reply\(\) takes .* got HttpError"):
        reply(http_error(500))  # type: ignore[arg-type]


def test_failure_constructors_defaults_and_validation() -> None:
    assert http_error(429, retry_after=1) == HttpError(429, None, 1, None, {})
    with pytest.raises(ScriptError, match=re.escape("400..599, got 200")):
        http_error(200)
    assert overflow() == Overflow("auto", 250_000, 200_000)
    with pytest.raises(ScriptError, match=r"overflow style .* got 'gemini'"):
        overflow("gemini")  # type: ignore[arg-type]
    assert stall().then == text("late")
    assert isinstance(cut(), Cut) and cut().after_chunks == 3
    with pytest.raises(ScriptError, match=re.escape("cut(after_chunks=...) must be >= 0, got -1")):
        cut(-1)
    assert isinstance(malformed(), Malformed)
    assert steps.html_error().status == 502


def test_from_context_resolves_against_what_was_sent() -> None:
    ctx = Context(messages=[UserMessage("first"), UserMessage([TextContent("second")])])
    assert resolve(from_context(lambda c: text(str(len(c.messages)))), ctx) == text("2")
    assert resolve(echo, ctx) == text("second")
    tool_ctx = Context(messages=[ToolResultMessage("c1", "read", [TextContent("file body")])])
    assert last_user_text(tool_ctx) == "file body"
    assert last_user_text(Context()) == ""


def test_from_context_returning_garbage_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match="returned str, expected a step"):
        resolve(from_context(lambda c: "oops"), Context())  # type: ignore[arg-type,return-value]


def test_steps_from_json_covers_every_shape() -> None:
    parsed = steps_from_json(
        [
            {"text": "hi"},
            {"thinking": "hmm", "text": "ok", "tool_calls": [{"name": "read", "arguments": {"p": 1}, "id": "t1"}]},
            {"http_error": 429, "retry_after": 2, "message": "slow down"},
            {"overflow": "openai", "tokens": 10, "maximum": 5},
            {"html_error": 503},
            {"stall": {"after_chunks": 1, "seconds": 0.5, "then": {"text": "late"}}},
            {"cut": {"after_chunks": 2, "of": {"text": "cut me"}}},
            {"malformed": {"after_chunks": 1, "data": "{bad"}},
            {"echo": True},
            {"stream_error": {"after_chunks": 0, "status": 429, "message": "slow"}},
        ]
    )
    assert parsed[0] == text("hi")
    assert parsed[1] == reply(thinking("hmm"), text("ok"), tool_call("read", {"p": 1}, id="t1"))
    assert parsed[2] == http_error(429, "slow down", retry_after=2)
    assert parsed[3] == overflow("openai", 10, 5)
    assert parsed[4] == steps.html_error(503)
    assert parsed[5] == Stall(1, 0.5, text("late"))
    assert parsed[6] == Cut(2, text("cut me"))
    assert isinstance(parsed[7], Malformed) and parsed[7].data == "{bad"
    assert parsed[8] is echo
    assert parsed[9] == steps.stream_error(0, 429, "slow")


@pytest.mark.parametrize(
    ("script", "match"),
    [
        ({"text": "x"}, "must be a list"),
        (["text"], "step 0: expected an object"),
        ([{"bogus": 1}], "step 0: unknown step"),
        ([{"text": "a"}, {"tool_calls": [{"arguments": {}}]}], "step 1: each tool call needs a 'name'"),
        ([{"http_error": "abc"}], "step 0: invalid literal"),
        ([{"cut": 3}], "step 0: 'cut' must be an object"),
        ([{"text": "a", "stop_reason": "done"}], "stop_reason must be stop, length or tool_use"),
    ],
)
def test_steps_from_json_rejects_bad_scripts(script: object, match: str) -> None:
    with pytest.raises(ScriptError, match=match):
        steps_from_json(script)
