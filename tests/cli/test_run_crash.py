"""``kill -9`` of ``nexus run`` mid-reply: the text already streamed to stdout is in the session afterwards."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

SRC = Path(__file__).resolve().parents[2] / "src"
REPLY = " ".join(f"word{i:04d}" for i in range(150))  # 1,349 characters, streamed 16 at a time


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def _journaled_text(db: Path) -> str | None:
    """The text of the streaming reply's journal entry, as the CLI process last wrote it."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT body FROM turn_journal WHERE kind = 'partial'").fetchone()
    except sqlite3.OperationalError:  # schema not created yet
        return None
    if row is None:
        return None
    content = json.loads(row[0])["message"]["content"]
    return "".join(block.get("text", "") for block in content)


def test_kill_9_mid_reply_keeps_the_streamed_text_in_the_session(isolated_env: Path) -> None:
    home = isolated_env
    db = home / "agents.db"
    streamed = REPLY[: 16 * 80]  # the role chunk, 80 text chunks, then the model goes quiet
    with FakeProviderServer(stall(after_chunks=81, seconds=60, then=text(REPLY))) as server:
        home.mkdir(parents=True, exist_ok=True)
        (home / "nexus.toml").write_text(
            'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\napi_key = "test"\n',
            encoding="utf-8",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "run", "tell me a long story"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(home),
        )
        try:
            deadline = time.monotonic() + 30
            while _journaled_text(db) != streamed:
                assert proc.poll() is None, f"nexus run exited early: {proc.stderr.read() if proc.stderr else b''!r}"
                assert time.monotonic() < deadline, f"the streamed text was not journaled: {_journaled_text(db)!r}"
                time.sleep(0.05)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert out.decode() == streamed  # what the user saw on stdout before the kill

    history = subprocess.run(
        [sys.executable, "-m", "nexus.cli", "sessions", "history", "main"],
        capture_output=True,
        text=True,
        env=_env(home),
        timeout=60,
        check=False,
    )
    assert history.returncode == 0, history.stderr
    assert "closed 1 turn left open by a stopped process" in history.stderr
    assert "tell me a long story" in history.stdout
    assert streamed in history.stdout
