"""Checkpoint texts derived from a turn's messages: the user's words, the reply's gist, the files touched."""

from __future__ import annotations

from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from nexus.routing._text import turn_text


def test_the_request_the_reply_and_the_files_of_the_coding_tools() -> None:
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** Add File: docs/new.md\n+x\n*** End Patch"
    text = turn_text([
        UserMessage("[Event context]\nTime: 2026-11-27T20:11:20+00:00 (UTC)\n[/Event context]\n\nFix the  login\ntest"),
        AssistantMessage([TextContent("Looking."), ToolCall("1", "read", {"path": "tests/test_login.py"}),
                          ToolCall("2", "bash", {"command": "pytest"})], stop_reason="tool_use"),
        ToolResultMessage("1", "read", [TextContent("...")]),
        ToolResultMessage("2", "bash", [TextContent("1 failed")], is_error=True),
        AssistantMessage([ToolCall("3", "edit", {"path": "auth/login.py", "oldText": "a", "newText": "b"}),
                          ToolCall("4", "apply_patch", {"patch": patch})], stop_reason="tool_use"),
        ToolResultMessage("3", "edit", [TextContent("ok")]),
        AssistantMessage([TextContent("Fixed: the login test " + "passes now. " * 80)]),
    ])  # fmt: skip
    assert text.ask == "Fix the login test"  # the engine's event header is not the user's work
    assert text.reply.startswith("Fixed: the login test passes now.") and len(text.reply) <= 400
    assert text.reply.endswith("…")
    assert text.files == ("tests/test_login.py", "auth/login.py", "src/app.py", "docs/new.md")
    assert text.wrote == ("auth/login.py", "src/app.py", "docs/new.md")
    assert text.tool_errors == 1
    assert text.context.startswith("Fix the login test — Fixed: the login test")


def test_a_turn_without_tools_or_reply() -> None:
    text = turn_text([UserMessage([TextContent("just a question")])])
    assert (text.ask, text.reply, text.files, text.context) == ("just a question", "", (), "just a question")
