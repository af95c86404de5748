"""Crash safety: a run killed with SIGKILL loses nothing it journaled, and the next run goes on.

A real child process runs ``run_agent`` against a loopback fake provider (the real
openai-completions provider over HTTP); the test kills it mid-run, then recovers the
ledger and runs the next message in this process. The streamed reply is journaled as it
arrives (at most ``PARTIAL_INTERVAL_S`` late), so a kill mid-reply keeps the text streamed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.config import load_config
from nexus.engine import run_agent
from nexus.engine.assembly.repair import MISSING_RESULT_TEXT
from nexus.ledger import Ledger
from nexus.ledger._turns import MID_REPLY_NOTE
from nexus.llm.serde import message_from_dict
from nexus.llm.types import AssistantMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text, tool_call

CHILD = """
import asyncio
from nexus.engine import run_agent
asyncio.run(run_agent("please do the task"))
"""


def _child_env(home: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    env.update(NEXUS_HOME=str(home), NEXUS_MODEL="openai/fake-model", OPENAI_BASE_URL=base_url)
    env["OPENAI_API_KEY"] = "sk-test"
    return env


async def _wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"child exited early ({proc.returncode}) before {what}:\n{out}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def _journal_count(db: Path, kind: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT COUNT(*) FROM turn_journal WHERE kind = ?", (kind,)).fetchone()
            return int(row[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def _partial_texts(db: Path) -> list[str]:
    """The text of each assistant message's journal entry, as the child last wrote it."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT body FROM turn_journal WHERE kind = 'partial' ORDER BY ordinal").fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []
    out = []
    for (body,) in rows:
        message = message_from_dict(json.loads(body)["message"])
        assert isinstance(message, AssistantMessage)
        out.append(message.text)
    return out


def _kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _start_child(home: Path, base_url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD], env=_child_env(home, base_url), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def _request_roles(body: object) -> list[str]:
    assert isinstance(body, dict)
    return [m["role"] for m in body["messages"]]


async def test_sigkill_after_tool_result_then_recover_and_continue(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolated_env
    db = home / "agents.db"
    async with FakeProviderServer(
        tool_call("write", {"path": "note.txt", "content": "saved before the crash"}, id="call_w1"),
        stall(after_chunks=2, seconds=60, then=text("this answer never finishes")),
    ) as server:
        proc = _start_child(home, server.openai_base_url)
        try:
            await _wait_for(lambda: _journal_count(db, "tool_call") >= 1, "the tool call to be journaled", proc)
            await _wait_for(lambda: _partial_texts(db)[1:] == ["this answer neve"], "the streamed text", proc)
        finally:
            if proc.poll() is None:
                _kill(proc)
    assert (home / "workspace" / "note.txt").read_text() == "saved before the crash"

    with Ledger.open(db) as ledger:
        [open_turn] = await ledger.turns.open_turns()
        assert open_turn.status == "streaming" and await ledger.sessions.head("main") is None
        assert await ledger.turns.recover() == [open_turn.id]
        head = await ledger.sessions.head("main")
        assert head is not None and head.id == open_turn.id and head.status == "aborted"
        [call] = await ledger.turns.tool_calls(head.id)
        assert call.call_id == "call_w1" and call.status == "completed"
        assert call.result is not None and "note.txt" in call.result.text
        roles = [m.role for m in await ledger.turns.messages(head.id)]
        assert roles == ["user", "assistant", "tool_result", "assistant"]  # the reply cut mid-stream is kept
        cut = (await ledger.turns.history("main"))[-1]
        assert isinstance(cut, AssistantMessage) and cut.text == "this answer neve"
        assert cut.stop_reason == "aborted" and cut.error_message == MID_REPLY_NOTE

        async with FakeProviderServer(text("continuing after the crash")) as server:
            monkeypatch.setenv("NEXUS_MODEL", "openai/fake-model")
            monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            result = await run_agent("what happened?", config=load_config(), ledger=ledger)
            body = server.requests[0].body
        assert result.stop_reason == "end_turn" and result.messages[-1].text == "continuing after the crash"
        assert _request_roles(body)[1:] == ["user", "assistant", "tool", "user"]  # an aborted reply is not replayed
        new_head = await ledger.sessions.head("main")
        assert new_head is not None and new_head.parent_turn_id == head.id and new_head.status == "completed"


async def test_sigkill_during_tool_leaves_orphan_that_next_run_repairs(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = isolated_env
    db = home / "agents.db"
    async with FakeProviderServer(tool_call("bash", {"command": "sleep 5"}, id="call_b1")) as server:
        proc = _start_child(home, server.openai_base_url)
        try:
            await _wait_for(
                lambda: _journal_count(db, "partial") >= 1, "the tool-calling message to be journaled", proc
            )
            await asyncio.sleep(0.2)  # the tool is running now
        finally:
            if proc.poll() is None:
                _kill(proc)

    async with FakeProviderServer(text("I will check again")) as server:
        monkeypatch.setenv("NEXUS_MODEL", "openai/fake-model")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with Ledger.open(db) as ledger:
            result = await run_agent("did the command finish?", config=load_config(), ledger=ledger)  # recovers first
            crashed = (await ledger.turns.path("main"))[0]
            assert crashed.status == "aborted"
            assert [m.role for m in await ledger.turns.messages(crashed.id)] == [
                "user",
                "assistant",
            ]  # the ledger is not rewritten
        body = server.requests[0].body
    assert result.stop_reason == "end_turn"
    assert _request_roles(body)[1:] == ["user", "assistant", "tool", "user"]
    assert isinstance(body, dict)
    synthetic = body["messages"][3]
    assert synthetic["tool_call_id"] == "call_b1" and MISSING_RESULT_TEXT in json.dumps(synthetic["content"])


REPLY = " ".join(f"word{i:04d}" for i in range(150))  # 1,349 characters, streamed 16 at a time


async def test_sigkill_mid_reply_keeps_the_text_streamed_so_far(isolated_env: Path) -> None:
    home = isolated_env
    db = home / "agents.db"
    streamed = REPLY[: 16 * 80]  # the role chunk, then 80 text chunks, then silence
    async with FakeProviderServer(stall(after_chunks=81, seconds=60, then=text(REPLY))) as server:
        proc = _start_child(home, server.openai_base_url)
        try:
            await _wait_for(lambda: _partial_texts(db) == [streamed], "all the streamed text to be journaled", proc)
        finally:
            if proc.poll() is None:
                _kill(proc)

    with Ledger.open(db) as ledger:
        [open_turn] = await ledger.turns.open_turns()
        assert await ledger.turns.recover() == [open_turn.id]
        turn = await ledger.turns.get(open_turn.id)
        assert turn.status == "aborted" and turn.stop_reason == "aborted"
        assert await ledger.sessions.head("main") == turn
        history = await ledger.turns.history("main")
        assert [m.role for m in history] == ["user", "assistant"]
        cut = history[-1]
        assert isinstance(cut, AssistantMessage) and cut.text == streamed and len(streamed) == 1280
        assert cut.stop_reason == "aborted" and cut.error_message == MID_REPLY_NOTE
        assert cut.model == "fake-model" and cut.provider == "openai"
        assert await ledger.turns.tool_calls(turn.id) == []
        with sqlite3.connect(db) as conn:  # write_turn replaced the journal: the entry is not kept twice
            assert conn.execute("SELECT COUNT(*) FROM turn_journal").fetchone()[0] == 0
