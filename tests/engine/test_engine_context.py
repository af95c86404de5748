"""Bootstrap files, workspace scaffolding, the system prompt and context assembly."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.engine import EventContext
from nexus.engine.assembly.bootstrap import BOOTSTRAP_FILES, load_bootstrap_files, scaffold_workspace
from nexus.engine.assembly.context import PromptOptions, assemble_context, build_current_message
from nexus.engine.assembly.system_prompt import RuntimeInfo, SystemPromptSection, build_system_prompt
from nexus.errors import ConfigError
from nexus.llm.abort import AbortSignal
from nexus.llm.types import ImageContent, Model, TextContent, UserMessage

MOMENT = datetime(2026, 2, 27, 14, 0, tzinfo=UTC)


async def _noop(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any) -> AgentToolResult:
    return AgentToolResult.text("ok")


def tool(name: str, description: str = "Does things.\nMore detail.") -> AgentTool:
    return AgentTool(name, description, {"type": "object"}, _noop)


def test_bootstrap_files_load_in_order_skipping_missing_and_blank(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("be kind", encoding="utf-8")
    (tmp_path / "AGENTS.md").write_text("rules", encoding="utf-8")
    (tmp_path / "USER.md").write_text("  \n\n", encoding="utf-8")
    (tmp_path / "MEMORY.md").mkdir()  # a directory with the name is not a file
    (tmp_path / "NOTES.md").write_text("not a bootstrap file", encoding="utf-8")
    files = load_bootstrap_files(tmp_path)
    assert [f.name for f in files] == ["AGENTS.md", "SOUL.md"]
    assert [f.content for f in files] == ["rules", "be kind"]
    assert not any(f.truncated for f in files)


def test_bootstrap_caps_per_file_and_in_total(tmp_path: Path) -> None:
    for name in BOOTSTRAP_FILES[:5]:
        (tmp_path / name).write_text(name[0] * 60_000, encoding="utf-8")
    files = load_bootstrap_files(tmp_path)
    assert [f.name for f in files] == list(BOOTSTRAP_FILES[:4])  # 4 x 50k = the 200k total
    assert all(f.truncated and f.content.startswith(f.name[0] * 50_000) for f in files)
    assert all("truncated: showing the first 50000 characters of 60000 bytes" in f.content for f in files)
    small = load_bootstrap_files(tmp_path, max_file_chars=100, max_total_chars=150)
    assert [(f.name, f.content.count(f.name[0]) >= 50) for f in small] == [("AGENTS.md", True), ("SOUL.md", True)]
    assert small[1].content.startswith("S" * 50 + "\n")


def test_bootstrap_bad_caps_and_missing_workspace(tmp_path: Path) -> None:
    assert load_bootstrap_files(tmp_path / "nope") == []
    with pytest.raises(ConfigError, match="positive"):
        load_bootstrap_files(tmp_path, max_file_chars=0)


def test_scaffold_creates_starter_once_and_never_overwrites(tmp_path: Path) -> None:
    workspace = tmp_path / "ws" / "nested"
    created = scaffold_workspace(workspace)
    assert created == [workspace, workspace / "AGENTS.md"]
    assert "# AGENTS.md" in (workspace / "AGENTS.md").read_text(encoding="utf-8")
    (workspace / "AGENTS.md").write_text("mine", encoding="utf-8")
    assert scaffold_workspace(workspace) == []
    assert (workspace / "AGENTS.md").read_text(encoding="utf-8") == "mine"


def test_scaffold_rejects_a_file_as_workspace(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a directory"):
        scaffold_workspace(target)


def test_system_prompt_sections_in_order(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Be brief.", encoding="utf-8")
    prompt = build_system_prompt(
        identity="You are Testy.",
        bootstrap_files=load_bootstrap_files(tmp_path),
        tools=[tool("read", "Read a file.\nLong text."), tool("bash", "")],
        runtime=RuntimeInfo(time=MOMENT, timezone="UTC", channel="cli", model="p/m", workspace="/ws", platform="linux"),
        extra_sections=[SystemPromptSection("skills", "- pdf")],
    )
    order = [
        prompt.index(tag) for tag in ("<identity>", "<bootstrap-files>", "<tools>", "<safety>", "<skills>", "<runtime>")
    ]
    assert order == sorted(order)
    assert '<file path="AGENTS.md">\nBe brief.\n</file>' in prompt
    assert "- read: Read a file.\n- bash" in prompt and "Long text" not in prompt
    assert "- Current date: 2026-02-27" in prompt and "14:00" not in prompt
    assert "- Channel: cli" in prompt and "- Model: p/m" in prompt and "- Working directory: /ws" in prompt
    precise = RuntimeInfo(time=MOMENT, precise_time=True).lines()
    assert "- Current time: 2026-02-27T14:00:00+00:00" in precise


def test_system_prompt_omits_empty_sections() -> None:
    prompt = build_system_prompt(identity="", safety=())
    assert prompt == ""
    assert build_system_prompt(safety=()).startswith("<identity>\nYou are Nexus")


def test_current_message_has_event_context_in_its_timezone() -> None:
    event = EventContext(
        time=MOMENT, timezone="Europe/Berlin", channel="telegram", sender="alice", extra={"Thread": "7"}
    )
    message = build_current_message("hello", event)
    assert isinstance(message.content, str)
    assert message.content == (
        "[Event context]\nTime: 2026-02-27T15:00:00+01:00 (Europe/Berlin)\nChannel: telegram\nSender: alice\n"
        "Thread: 7\n[/Event context]\n\nhello"
    )
    with_image = build_current_message("look", None, [ImageContent("AA", "image/png")])
    assert isinstance(with_image.content, list) and with_image.content[0] == TextContent("look")


def test_event_context_rejects_bad_timezone_and_naive_time() -> None:
    with pytest.raises(ConfigError, match="unknown timezone 'Mars/Base'"):
        build_current_message("x", EventContext(timezone="Mars/Base"))
    with pytest.raises(ConfigError, match="timezone-aware"):
        build_current_message("x", EventContext(time=datetime(2026, 1, 1)))


def test_assemble_context_puts_it_all_together(tmp_path: Path) -> None:
    model = Model("m1", "prov", "api", context_window=50_000, max_tokens=4_000)
    workspace = tmp_path / "ws"
    history = [UserMessage("earlier " * 100)]
    ctx = assemble_context(
        model=model,
        workspace=workspace,
        session_label="main",
        history=history,
        message="do it",
        event=EventContext(time=MOMENT, channel="cli"),
        tools=[tool("read"), tool("bash"), tool("write")],
        deny=["bash"],
        parent_turn_id="T1",
        max_response_tokens=1_000,
    )
    assert (workspace / "AGENTS.md").exists()
    assert [t.name for t in ctx.tools] == ["read", "write"]
    assert '<file path="AGENTS.md">' in ctx.system_prompt and "- bash" not in ctx.system_prompt
    assert isinstance(ctx.current_message.content, str) and ctx.current_message.content.endswith("\n\ndo it")
    assert ctx.history == history and ctx.history is not history
    assert (ctx.model, ctx.provider, ctx.parent_turn_id, ctx.session_label) == ("m1", "prov", "T1", "main")
    budget = ctx.token_budget
    assert budget.context_window == 50_000 and budget.reserve_output == 1_000
    assert budget.history == 200 and budget.system > 0 and budget.tools > 0 and budget.current > 0
    assert len(ctx.run_id) == 26 and ctx.workspace_path == str(workspace)


def test_assemble_context_without_bootstrap_and_with_bad_label(tmp_path: Path) -> None:
    model = Model("m1", "prov", "api")
    ctx = assemble_context(
        model=model,
        workspace=tmp_path,
        session_label="s",
        history=[],
        message=UserMessage("hi"),
        prompt=PromptOptions(identity="Bot.", load_bootstrap=False, scaffold=False),
    )
    assert not (tmp_path / "AGENTS.md").exists()
    assert ctx.system_prompt.startswith("<identity>\nBot.\n</identity>") and "bootstrap" not in ctx.system_prompt
    with pytest.raises(ConfigError, match="session_label"):
        assemble_context(model=model, workspace=tmp_path, session_label="", history=[], message="x")


def test_local_timezone_follows_tz_and_falls_back_to_a_valid_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    from zoneinfo import ZoneInfo

    from nexus.engine.assembly.context import local_timezone

    monkeypatch.setenv("TZ", "America/New_York")
    assert local_timezone() == "America/New_York"
    monkeypatch.setenv("TZ", "Not/AZone")
    ZoneInfo(local_timezone())  # an invalid TZ is ignored: the result is always a usable zone
    for utc in ("Etc/UTC", ":Etc/UTC", "Zulu"):  # how a Debian machine names UTC reads as a server's default does
        monkeypatch.setenv("TZ", utc)
        assert local_timezone() == "UTC"


def test_utc_reads_as_the_database_s_utc_without_loading_zoneinfo() -> None:
    code = """
import sys
from datetime import datetime
from nexus.engine.assembly.context import EventContext, local_timezone, resolve_timezone
moment = datetime(2026, 7, 1, 12, 30, 5, tzinfo=resolve_timezone("UTC"))
print(local_timezone(), sorted({"zoneinfo", "sysconfig"} & set(sys.modules)))
print(EventContext(time=moment).header().splitlines()[1], moment.tzname(), moment.utcoffset())
from zoneinfo import ZoneInfo
print(moment.isoformat() == datetime(2026, 7, 1, 12, 30, 5, tzinfo=ZoneInfo("UTC")).isoformat())
"""
    env = {**os.environ, "TZ": "Etc/UTC", "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "UTC []",  # a UTC name, or the default zone, needs no time-zone database
        "Time: 2026-07-01T12:30:05+00:00 (UTC) UTC 0:00:00",
        "True",
    ]


def test_default_prompt_mentions_tools_only_when_tools_are_offered() -> None:
    plain = build_system_prompt()
    assert "tool" not in plain.lower(), plain
    assert "<identity>\nYou are Nexus" in plain and "<safety>" in plain
    with_tools = build_system_prompt(tools=[tool("read")])
    assert "access to tools" in with_tools and "Never fabricate tool results" in with_tools
    assert "<tools>" in with_tools and "- read: Does things." in with_tools


def test_the_platform_line_names_what_the_platform_module_would() -> None:
    import platform

    assert RuntimeInfo().platform == f"{platform.system().lower()} {platform.machine()}"


def test_runs_that_compose_the_same_system_prompt_keep_one_copy(tmp_path: Path) -> None:
    """1,000 runs of one agent at once held 1,000 equal ~3 KB prompts (bench_engine_concurrent: +2.9 KB a run)."""
    model = Model("m1", "prov", "api", context_window=50_000, max_tokens=4_000)
    (tmp_path / "AGENTS.md").write_text("Be brief.")

    def compose(label: str, when: datetime = MOMENT, channel: str = "cli", tools: tuple[str, ...] = ("read",)) -> str:
        event = EventContext(time=when, channel=channel)
        return assemble_context(
            model=model, workspace=tmp_path, session_label=label, history=[], message="hi", event=event,
            tools=[tool(name) for name in tools],
        ).system_prompt  # fmt: skip

    first, second = compose("a"), compose("b")
    assert first == second and first is second
    (tmp_path / "AGENTS.md").write_text("Be thorough.")  # a changed file is seen by the next run
    changed = compose("c")
    assert "Be thorough." in changed and changed != first
    assert compose("c", when=MOMENT.replace(hour=23)) is changed  # the prompt shows the date only
    assert "2026-02-28" in compose("c", when=MOMENT.replace(day=28))
    assert "Channel: web" in compose("c", channel="web")
    assert "- write:" in compose("c", tools=("read", "write")) and "- write:" not in changed
