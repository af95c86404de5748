"""A catastrophic regex in the pure-Python grep: the tool's timeout fires, abort works, nexus ends on SIGTERM/SIGINT.

Python's ``re`` holds the GIL for a whole match, so the search used to freeze the event loop
and the signal handlers (only SIGKILL ended ``nexus``). It now runs in a killable child process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.llm.abort import AbortSignal
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text, tool_call
from nexus.tools import ToolError, Workspace, find_tool, grep_tool

from ._helpers import call

SRC = Path(__file__).resolve().parents[2] / "src"
CATASTROPHIC = "(a+)+$"
EVIL_LINE = "a" * 40 + "!"  # 2**40 backtracking steps for CATASTROPHIC: never finishes
# A glob is a regex too. Most globs compile without backtracking (tests/tools/test_glob_backtracking.py),
# but a class that can match "/" after an in-part star keeps it: against 40 "a"s, ~C(40, 12) steps.
EVIL_GLOB = "*[!x]" * 12 + "*b"
EVIL_NAME = "a" * 40
CALLS = {"grep": {"pattern": CATASTROPHIC}, "find": {"pattern": EVIL_GLOB}}


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc/PID/task/*/children``)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _search_workers(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        try:
            if b"_pysearch.py" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


@pytest.fixture
def evil(ws: Workspace) -> Workspace:
    (ws.root / "evil.txt").write_text(f"fine\n{EVIL_LINE}\n")
    return ws


async def test_tool_timeout_stops_a_catastrophic_regex(evil: Workspace) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    background = asyncio.create_task(ticker())
    try:
        with pytest.raises(ToolError, match=r"grep stopped after 0\.5 seconds \(its time limit\)"):
            await asyncio.wait_for(call(grep_tool(evil, use_ripgrep=False, timeout=0.5), pattern=CATASTROPHIC), 30)
    finally:
        background.cancel()
    assert ticks > 5, "the event loop was frozen during the search"
    assert _search_workers(os.getpid()) == [], "the search process outlived the call"


async def test_abort_stops_a_catastrophic_regex(evil: Workspace) -> None:
    abort = AbortSignal()
    task = asyncio.create_task(
        call(grep_tool(evil, use_ripgrep=False, timeout=None), signal=abort, pattern=CATASTROPHIC)
    )
    for _ in range(200):
        if _search_workers(os.getpid()):
            break
        await asyncio.sleep(0.02)
    assert _search_workers(os.getpid()), "the search process did not start"
    abort.abort()
    with pytest.raises(ToolError, match="Operation aborted"):
        await asyncio.wait_for(task, 30)
    assert _search_workers(os.getpid()) == []


async def test_find_honours_its_time_limit(ws: Workspace) -> None:
    """The walk runs in a child process that the time limit ends, whatever the walk is doing.

    (A glob like ``*a*a*…*b`` used to make the walk itself hang; globs compile without
    backtracking now, so the limit is exercised with one no walk can meet: 1 ms, less than the
    child needs to start.)
    """
    (ws.root / EVIL_NAME).write_text("x\n")
    with pytest.raises(ToolError, match=r"find stopped after 0\.001 seconds \(its time limit\)"):
        await asyncio.wait_for(call(find_tool(ws, use_fd=False, timeout=0.001), pattern=EVIL_GLOB), 30)
    assert _search_workers(os.getpid()) == []


async def test_find_fallback_honours_abort(ws: Workspace) -> None:
    abort = AbortSignal()
    abort.abort()
    with pytest.raises(ToolError, match="Operation aborted"):
        await call(find_tool(ws, use_fd=False), signal=abort, pattern="*")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "NEXUS_PURE_PYTHON_SEARCH": "1"}


@pytest.mark.parametrize("tool", ["grep", "find"])
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGKILL, -9)])
def test_nexus_run_ends_promptly_on_a_signal_during_a_hung_grep(
    isolated_env: Path, sig: signal.Signals, code: int, tool: str
) -> None:
    home = isolated_env
    workspace = home / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "evil.txt").write_text(f"{EVIL_LINE}\n")
    (workspace / EVIL_NAME).write_text("x\n")
    with FakeProviderServer(tool_call(tool, CALLS[tool]), text("unreachable")) as server:
        (home / "nexus.toml").write_text(
            'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\napi_key = "test"\n',
            encoding="utf-8",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "run", "find the evil line"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(home),
        )
        assert proc.stderr is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            deadline = time.monotonic() + 60
            while not any(tool in line for line in lines):  # the tool line: the call has started
                assert proc.poll() is None, f"nexus run exited early: {lines}"
                assert time.monotonic() < deadline, f"the grep call never started: {lines}"
                time.sleep(0.05)
            settle = time.monotonic() + 1.0  # let the search get going (a child process since the fix)
            while not _search_workers(proc.pid) and time.monotonic() < settle:
                time.sleep(0.05)
            workers = _search_workers(proc.pid)
            proc.send_signal(sig)
            proc.wait(timeout=30)  # before the fix: hangs here until SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=10)
    err = "".join(lines)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    assert workers, "the pure-Python search did not run in a child process"
    for _ in range(100):  # the orphaned worker is reaped by init, not at once
        if not any(Path(f"/proc/{w}").exists() for w in workers):
            break
        time.sleep(0.05)
    assert not any(Path(f"/proc/{w}").exists() for w in workers), "the search process outlived nexus"
    if sig == signal.SIGKILL:
        return  # no turn is closed by a SIGKILLed process; the next start-up recovers it (tests/cli)
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["aborted"]
        texts = [str(m.message) for m in run_inline(ledger.turns.messages(turns[0].id))]
    assert any("find the evil line" in t for t in texts), texts
