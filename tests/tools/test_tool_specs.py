"""The tool list a run declares comes from the specs; a tool's implementation is imported on its first call."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.llm.abort import AbortSignal
from nexus.tools import ALL_TOOLS, ToolError, Workspace, coding_tools

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("timeout", [120.0, None, 7.5])
def test_declared_tools_are_what_the_implementations_build(tmp_path: Path, timeout: float | None) -> None:
    ws = Workspace(tmp_path)
    for declared in coding_tools(ws, bash_timeout=timeout):
        factory = getattr(importlib.import_module(f"nexus.tools.{declared.name}"), f"{declared.name}_tool")
        built = factory(ws, timeout=timeout) if declared.name == "bash" else factory(ws)
        seen = (declared.description, declared.parameters, declared.label, declared.sequential, declared.validate)
        assert seen == (built.description, built.parameters, built.label, built.sequential, built.validate)


def test_no_implementation_is_imported_until_the_model_calls_the_tool(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    code = f"""
import asyncio, sys
from nexus.llm.abort import AbortSignal
from nexus.tools import coding_tools
tools = {{t.name: t for t in coding_tools({str(tmp_path)!r})}}
implementations = ["nexus.tools." + name for name in tools]
print(sorted(m for m in implementations if m in sys.modules))
result = asyncio.run(tools["ls"].execute("c1", {{}}, AbortSignal(), lambda update: None))
print(result.content[0].text.split())
print(sorted(m for m in implementations if m in sys.modules))
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.splitlines() == ["[]", "['a.txt']", "['nexus.tools.ls']"]


def test_a_deferred_tool_runs_like_the_real_one(tmp_path: Path) -> None:
    tools = {t.name: t for t in coding_tools(tmp_path)}
    assert list(tools) == list(ALL_TOOLS)

    async def calls() -> list[str]:
        signal = AbortSignal()
        write = await tools["write"].execute("c1", {"path": "x.txt", "content": "one\n"}, signal, lambda u: None)
        read = await tools["read"].execute("c2", {"path": "x.txt"}, signal, lambda u: None)
        return [write.content[0].text, read.content[0].text]  # type: ignore[union-attr]

    written, read = asyncio.run(calls())
    assert "x.txt" in written and read.startswith("one")
    with pytest.raises(ToolError, match=r"File not found: missing\.txt"):  # errors raise from the real tool, as before
        asyncio.run(tools["read"].execute("c3", {"path": "missing.txt"}, AbortSignal(), lambda u: None))
