"""A run waiting for a session's lock continues after the holder's turn, even when the holder was SIGKILLed.

Issue 8 item 1: B waited for A's lock; A was killed; B continued from the old head and A's turn
(with the user's message) was recovered later as a side branch, out of the session's history.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .fake_config import write_fake_config

SRC = Path(__file__).resolve().parents[2] / "src"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def _start(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )


def _wait_for(what: str, check: object, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not check():  # type: ignore[operator]
        assert proc.poll() is None, f"nexus run exited before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_waiting_run_continues_after_the_killed_holders_turn(isolated_env: Path) -> None:
    home = isolated_env
    steps = [text("one"), stall(after_chunks=2, seconds=60, then=text("A never finishes this")), text("B's answer")]
    with FakeProviderServer(*steps) as server:
        write_fake_config(home, server)
        first = subprocess.run(
            [sys.executable, "-m", "nexus.cli", "run", "-s", "x", "first"],
            capture_output=True,
            text=True,
            env=_env(home),
            timeout=120,
            check=False,
        )
        assert first.returncode == 0, first.stderr
        run_a = _start(home, "-s", "x", "message from A")
        run_b: subprocess.Popen[str] | None = None
        try:
            _wait_for("A's request", lambda: len(server.requests) == 2, run_a)  # A holds x's lock, turn open
            run_b = _start(home, "-s", "x", "message from B")
            assert run_b.stderr is not None
            assert "waiting for another run of session x" in run_b.stderr.readline()
            os.kill(run_a.pid, signal.SIGKILL)  # not reaped yet: a zombie until the end of the test
            out_b, err_b = run_b.communicate(timeout=120)
        finally:
            for proc in (run_a, run_b):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                if proc is not None:
                    proc.communicate(timeout=30)
    assert run_b.returncode == 0, err_b
    assert out_b.strip() == "B's answer"
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("x"))
        history = run_inline(ledger.turns.history("x"))
    assert [t.status for t in turns] == ["completed", "aborted", "completed"]
    assert turns[2].parent_turn_id == turns[1].id, "B's turn follows A's recovered turn"
    said = [str(m.content) for m in history if m.role == "user"]
    assert len(said) == 3 and all(t in m for t, m in zip(["first", "from A", "from B"], said, strict=True)), said
    assert "closed 1 turn left open by a stopped process" in err_b
