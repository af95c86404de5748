"""StreamEvent JSON is exactly seed 004's, and tool summaries are human lines."""

from __future__ import annotations

import json

import pytest

from nexus.adapters.types import DeliveryTarget, ProtocolError
from nexus.streaming.events import (
    Reasoning,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    Token,
    ToolStatus,
    from_json,
    to_line,
)
from nexus.streaming.tool_status import summary

SEED_LINES = [
    '{"type":"stream_start","runId":"run_abc","sessionLabel":"main","target":{"channel":"discord","account_id":"a","to":"channel:123456","thread_id":"789"}}',
    '{"type":"token","text":"Let me "}',
    '{"type":"tool_status","toolName":"Read","toolCallId":"tc_1","status":"started"}',
    '{"type":"tool_status","toolName":"Read","toolCallId":"tc_1","status":"completed","summary":"Read package.json"}',
    '{"type":"reasoning","text":"hmm"}',
    '{"type":"stream_end","runId":"run_abc","final":false}',
    '{"type":"stream_error","error":"boom","partial":true}',
    '{"type":"stream_end","runId":"run_abc","final":true}',
]


@pytest.mark.parametrize("line", SEED_LINES)
def test_json_round_trip_uses_the_seed_field_names(line: str) -> None:
    event = from_json(json.loads(line))
    assert json.loads(to_line(event)) == json.loads(line)
    assert to_line(event).endswith(b"\n") and to_line(event).count(b"\n") == 1


def test_every_variant_has_its_type_literal() -> None:
    target = DeliveryTarget("c", "a", "t")
    events: list[StreamEvent] = [
        StreamStart("r", "s", target),
        Token("x"),
        Reasoning("y"),
        ToolStatus("read", "c1", "started"),
        StreamEnd("r"),
        StreamError("e", False),
    ]
    assert [e.type for e in events] == [
        "stream_start",
        "token",
        "reasoning",
        "tool_status",
        "stream_end",
        "stream_error",
    ]
    assert not hasattr(events[1], "__dict__"), "slotted"


def test_token_line_escapes_like_json() -> None:
    assert json.loads(to_line(Token('quote " newline \n emoji \U0001f600'))) == {
        "type": "token",
        "text": 'quote " newline \n emoji \U0001f600',
    }


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"type": "token"}, "needs 'text'"),
        ({"type": "tool_status", "toolName": "x", "toolCallId": "c", "status": "done"}, "status must be one of"),
        ({"type": "telepathy"}, "unknown stream event type"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_events_are_refused_with_the_reason(data: object, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        from_json(data)


@pytest.mark.parametrize(
    ("tool", "args", "done", "details", "failed", "line"),
    [
        ("read", {"path": "package.json"}, False, None, False, "Reading package.json"),
        ("read", {"path": "package.json"}, True, None, False, "Read package.json"),
        (
            "edit",
            {"path": "src/app.py"},
            True,
            {"diff": "--- a\n+++ b\n@@ -1 +1,3 @@\n-x\n+y\n+z\n+w\n"},
            False,
            "Edited src/app.py (+3 \u22121)",
        ),
        ("bash", {"command": "pytest -q"}, True, {"exit_code": 0}, False, "Ran `pytest -q` (exit 0)"),
        ("bash", {"command": "pytest -q"}, True, {"exit_code": 1}, True, "Ran `pytest -q` (exit 1) (failed)"),
        (
            "bash",
            {"command": "sleep 999"},
            True,
            {"exit_code": None, "timed_out": True},
            True,
            "Ran `sleep 999` (timed out)",
        ),
        ("write", {"path": "a.txt", "content": "one\ntwo\n"}, True, None, False, "Wrote a.txt (2 lines)"),
        ("grep", {"pattern": "TODO"}, True, {"matches": 1}, False, "Searched for `TODO` (1 match)"),
        ("find", {"pattern": "*.py"}, True, {"count": 12}, False, "Found 12 files matching `*.py`"),
        ("ls", {"path": "src"}, True, {"entries": 3}, False, "Listed src (3 entries)"),
        ("apply_patch", {}, True, {"files": ["M a", "A b"]}, False, "Applied a patch to 2 files"),
        ("spawn_agent", {"task": "x"}, False, None, False, "Running spawn_agent"),
    ],
)
def test_tool_summaries_are_human_lines(
    tool: str, args: dict[str, object], done: bool, details: dict[str, object] | None, failed: bool, line: str
) -> None:
    assert summary(tool, args, done=done, details=details, failed=failed) == line


def test_long_commands_are_clipped_to_one_line() -> None:
    line = summary("bash", {"command": "echo " + "x" * 200 + "\nrm -rf /tmp/y"}, done=False)
    assert len(line) < 80 and "\n" not in line and line.endswith("…`")
