"""The output of ``nexus run``/``chat`` in-process: tool lines, notices, line breaks, the JSON events."""

from __future__ import annotations

import io
import json

from nexus.agent.tool_types import AgentToolResult
from nexus.cli._render import (
    JSON_EVENT_TYPES,
    JsonRenderer,
    RunStart,
    RunSummary,
    TextRenderer,
    describe_engine_event,
    format_args,
    summarize_result,
)
from nexus.engine.types import (
    CompactionEndEvent,
    CompactionStartEvent,
    FallbackEvent,
    RetryEvent,
    WaitEvent,
)
from nexus.ledger import CompactionRecord


def test_format_args_keeps_short_values_and_sizes_long_ones() -> None:
    assert format_args({"path": "README.md", "limit": 20}) == "path=README.md limit=20"
    assert format_args({"path": "a.txt", "content": "x\ny\n"}) == "path=a.txt content=<4 chars>"
    long_command = "echo " + "a" * 200
    shown = format_args({"command": long_command})
    assert shown.startswith("command=echo aaa") and shown.endswith("…") and len(shown) < 80
    assert format_args({"edits": [{"oldText": "a", "newText": "b"}]}) == 'edits=[{"oldText": "a", "newText": "b"}]'


def test_summarize_result_per_tool_kind() -> None:
    read = AgentToolResult.text("one\ntwo\nthree", details={"total_lines": 3})
    assert summarize_result("read", read, False) == "3 lines"
    write = AgentToolResult.text("Successfully wrote 5 bytes", details={"bytes": 5})
    assert summarize_result("write", write, False) == "5 bytes"
    bash_ok = AgentToolResult.text("hi\n", details={"exit_code": 0})
    assert summarize_result("bash", bash_ok, False) == "exit 0, 1 line"
    bash_bad = AgentToolResult.text("boom\n\nCommand exited with code 2", details={"exit_code": 2}, is_error=True)
    assert summarize_result("bash", bash_bad, True) == "exit 2"
    timed_out = AgentToolResult.text("…", details={"exit_code": None, "timed_out": True}, is_error=True)
    assert summarize_result("bash", timed_out, True) == "timed out"
    raised = AgentToolResult.text("File not found: x.txt (looked in /w/x.txt).\nmore", is_error=True)
    assert summarize_result("read", raised, True) == "File not found: x.txt (looked in /w/x.txt)."


def test_text_renderer_streams_and_separates_messages() -> None:
    out, err = io.StringIO(), io.StringIO()
    r = TextRenderer(out, err, show_reasoning=True, color=False)
    r.start(RunStart("run1", "main", "fake/m", session_created=True))
    r.message_end()  # a model call starts before any text: no blank line
    r.reasoning("thinking…")
    r.text("Let me look")
    r.message_end()
    r.tool_start("c1", "read", {"path": "a.txt"})
    r.tool_end("c1", "read", AgentToolResult.text("x\ny"), False)
    r.message_end()
    r.text("It has two lines.")
    r.finish(RunSummary("run1", "main", "completed", "end_turn", session_created=True))
    assert out.getvalue() == "Let me look\nIt has two lines.\n"
    assert err.getvalue() == "thinking…\n→ read path=a.txt\n✓ read (2 lines)\nsession: main (new)\n"


def test_a_tool_calls_arguments_and_result_cannot_drive_the_terminal() -> None:
    """The model writes a tool call's arguments (and the tool's output its result): printed raw, a label like
    ``../evil\x1b[31mRED`` recoloured the terminal; the stored history escaped it already."""
    out, err = io.StringIO(), io.StringIO()
    r = TextRenderer(out, err, show_reasoning=False, color=False)
    r.tool_start("c1", "spawn_agent", {"label": "../evil\x1b[31mRED", "task": "t\x1b]0;title\x07"})
    r.tool_end("c1", "bash", AgentToolResult.text("", details={"exit_code": 1}, is_error=True), True)
    r.tool_start("c2", "read\x1b[2J", {})
    assert "\x1b" not in err.getvalue() and "\x07" not in err.getvalue()
    assert err.getvalue().startswith(r"→ spawn_agent label=../evil\x1b[31mRED task=t\x1b]0;title\x07")


def test_reasoning_hidden_without_thinking_and_color_only_when_asked() -> None:
    out, err = io.StringIO(), io.StringIO()
    r = TextRenderer(out, err, show_reasoning=False, color=True)
    r.reasoning("secret")
    r.tool_end("c1", "bash", AgentToolResult.text("", details={"exit_code": 1}, is_error=True), True)
    assert "secret" not in err.getvalue()
    assert err.getvalue() == "\x1b[31m✗ bash: exit 1\x1b[0m\n"


def test_engine_events_become_one_line_notices() -> None:
    retry = RetryEvent(1, "first", "openai/gpt", "rate_limit", 2.0, "slow down\nplease", next_profile="second")
    kind, text, data = describe_engine_event(retry)
    assert kind == "retry" and "\n" not in text
    assert text == "↻ openai/gpt: rate_limit (attempt 1), retrying in 2.0s with profile second: slow down please"
    assert data["nextProfile"] == "second" and data["delaySeconds"] == 2.0
    # the same key again: no "other profile" is named (a single-key provider has none)
    same = RetryEvent(2, "main", "openai/gpt", "overloaded", 1.0, "busy", next_profile="main")
    assert describe_engine_event(same)[1] == "↻ openai/gpt: overloaded (attempt 2), retrying in 1.0s: busy"
    only = RetryEvent(1, None, "local/m", "network", 0.2, "refused", next_profile=None)
    assert describe_engine_event(only)[1] == "↻ local/m: network (attempt 1), retrying in 0.2s: refused"
    kind, text, data = describe_engine_event(WaitEvent("anthropic", "main", "claude", 4.0, keys=2))
    assert (kind, text) == ("wait", "… every key of anthropic is cooling down after errors; waiting 4.0s")
    assert data["keys"] == 2
    single = describe_engine_event(WaitEvent("anthropic", None, "claude", 4.0))[1]
    assert single == "… anthropic is cooling down after an error; waiting 4.0s before calling it"
    kind, text, data = describe_engine_event(FallbackEvent("a/x", "b/y", "rate_limit"))
    assert kind == "fallback" and text == "⇢ a/x: falling back to b/y (rate_limit)" and data["skipped"] is False
    kind, text, _ = describe_engine_event(CompactionStartEvent("overflow_recovery", 40, 150_000))
    assert kind == "compaction_start" and "40 messages" in text
    record = CompactionRecord(summary="s", summarized_through_turn_id="", tokens_before=150_000, tokens_after=20_000)
    done = CompactionEndEvent(record)
    assert describe_engine_event(done)[1] == "⋯ compacted: ~150000 → ~20000 tokens"
    failed = CompactionEndEvent(None, "the summariser failed", will_retry=True)
    kind, text, data = describe_engine_event(failed)
    assert kind == "compaction_end" and data == {"error": "the summariser failed", "willRetry": True}


def test_json_renderer_writes_one_documented_event_per_line() -> None:
    out = io.StringIO()
    r = JsonRenderer(out)
    r.start(RunStart("run1", "main", "fake/m"))
    r.reasoning("hmm")
    r.text("Hi")
    r.tool_start("c1", "ls", {})
    r.tool_end("c1", "ls", AgentToolResult.text("a\nb"), False)
    r.notice(*describe_engine_event(WaitEvent("p", None, "m", 1.0)))
    r.error("boom", "model_error")
    r.finish(RunSummary("run1", "main", "failed", "error", turn_id="t1", error="boom", usage={"total": 3}))
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["type"] for e in events] == [
        "stream_start",
        "reasoning",
        "token",
        "tool_status",
        "tool_status",
        "wait",
        "stream_error",
        "stream_end",
    ]
    assert all(e["type"] in JSON_EVENT_TYPES for e in events)
    assert events[4]["summary"] == "2 lines" and events[4]["status"] == "completed"
    assert events[6] == {"type": "stream_error", "error": "boom", "kind": "model_error", "partial": True}
    assert events[7]["turnId"] == "t1" and events[7]["status"] == "failed" and events[7]["usage"] == {"total": 3}
    assert events[7]["usageEstimated"] is False


def test_short_waits_are_shown_to_the_hundredth() -> None:
    from nexus.cli._render import _seconds

    assert [_seconds(d) for d in (0.0099, 0.01, 0.004, 0.2, 0.05, 0.049999, 2.0, 3600.0)] == [
        "0.01s", "0.01s", "0.01s", "0.2s", "0.05s", "0.05s", "2.0s", "3600.0s",
    ]  # fmt: skip
