from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from nexus.agent.tool_types import AgentToolResult
from nexus.llm.abort import AbortSignal
from nexus.tools import ToolError, Workspace, bash_tool

from ._helpers import call, text_of


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_output_merged_in_workspace(ws: Workspace) -> None:
    result = await call(bash_tool(ws), command="pwd; echo out; echo err >&2")
    assert text_of(result) == f"{ws.root}\nout\nerr"
    assert not result.is_error and result.details is not None and result.details["exit_code"] == 0


async def test_nonzero_exit_is_error(ws: Workspace) -> None:
    result = await call(bash_tool(ws), command="echo boom; exit 3")
    assert result.is_error
    assert text_of(result) == "boom\n\nCommand exited with code 3"
    assert result.details is not None and result.details["exit_code"] == 3


async def test_no_output_and_stdin_closed(ws: Workspace) -> None:
    assert text_of(await call(bash_tool(ws), command="true")) == "(no output)"
    result = await call(bash_tool(ws), command="cat; echo done")  # would hang if stdin were inherited
    assert text_of(result) == "done"


async def test_timeout_kills_process_group(ws: Workspace, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    tool = bash_tool(ws, timeout=0.5)
    result = await call(tool, command=f"sleep 60 & echo $! > {pidfile}; echo started; wait")
    assert result.is_error
    assert text_of(result).endswith("Command timed out after 0.5 seconds")
    assert "started" in text_of(result)
    child = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        await asyncio.sleep(0.05)
    assert not _alive(child)


async def test_per_call_timeout_overrides_default(ws: Workspace) -> None:
    result = await call(bash_tool(ws, timeout=None), command="sleep 5", timeout=0.3)
    assert result.is_error and "timed out after 0.3 seconds" in text_of(result)


async def test_abort_kills_command(ws: Workspace) -> None:
    signal = AbortSignal()
    task = asyncio.create_task(call(bash_tool(ws), signal=signal, command="echo begin; sleep 30"))
    await asyncio.sleep(0.3)
    signal.abort()
    result = await asyncio.wait_for(task, 10)
    assert result.is_error and text_of(result).endswith("Command aborted")
    assert result.details is not None and result.details["aborted"] is True


async def test_streams_partial_output(ws: Workspace) -> None:
    updates: list[AgentToolResult] = []
    await call(bash_tool(ws), updates=updates, command="echo first; sleep 0.3; echo second")
    assert updates
    assert text_of(updates[0]).startswith("first")


async def test_large_output_tail_truncated_and_spilled(ws: Workspace) -> None:
    result = await call(bash_tool(ws), command="seq 1 30000")
    text = text_of(result)
    body, notice = text.split("\n\n[")
    assert body.split("\n")[-1] == "30000"
    assert len(body.split("\n")) == 2000 and body.split("\n")[0] == "28001"
    assert "Showing lines 28001-30000 of 30000" in notice
    assert result.details is not None
    full = Path(result.details["full_output_path"])
    try:
        saved = await asyncio.to_thread(full.read_text)
        assert saved.split("\n")[:3] == ["1", "2", "3"]
        assert saved.count("\n") == 30000
    finally:
        await asyncio.to_thread(full.unlink)


async def test_background_child_does_not_hang(ws: Workspace) -> None:
    result = await asyncio.wait_for(call(bash_tool(ws), command="(sleep 3 &) ; echo quick"), 2.5)
    assert text_of(result) == "quick"


async def test_bad_args(ws: Workspace) -> None:
    with pytest.raises(ToolError, match="'command' must not be empty"):
        await call(bash_tool(ws), command="")
    with pytest.raises(ToolError, match="'timeout' must be a positive number"):
        await call(bash_tool(ws), command="true", timeout=-1)


async def test_abort_kills_the_whole_process_group_even_term_ignoring_children(ws: Workspace, tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    signal = AbortSignal()
    command = f"(trap '' TERM; sleep 60) & echo $! > {pidfile}; echo ready; sleep 60"
    task = asyncio.create_task(call(bash_tool(ws), signal=signal, command=command))
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.05)
    child = int(pidfile.read_text())
    assert _alive(child)
    signal.abort()
    result = await asyncio.wait_for(task, 10)
    assert result.is_error and text_of(result) == "ready\n\nCommand aborted"
    for _ in range(50):
        if not _alive(child):
            break
        await asyncio.sleep(0.05)
    assert not _alive(child)


async def test_runs_in_the_workspace_and_reports_exit_code(ws: Workspace) -> None:
    result = await call(bash_tool(ws), command="pwd; echo oops >&2; exit 7")
    assert text_of(result) == f"{ws.root}\noops\n\nCommand exited with code 7"
    assert result.is_error and result.details is not None and result.details["exit_code"] == 7
    ok = await call(bash_tool(ws), command="true")
    assert not ok.is_error and ok.details is not None and ok.details["exit_code"] == 0
