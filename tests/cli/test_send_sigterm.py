"""SIGTERM to ``nexus send --wait`` running the conversation in its own process: exit 143 after the run is
aborted and written with what it had streamed, as Ctrl-C and ``nexus run`` do.

It was Python's default SIGTERM: the process died mid-run, the turn stayed open until the next command's
``recover()`` closed it as a crash, and the message stayed ``processing`` (a stranger's trial).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .cli_process import SRC, RunNexus

pytestmark = pytest.mark.slow  # real processes


def test_sigterm_aborts_and_writes_the_run_then_exits_143(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    server.chunk_chars = 2
    server.script(stall(after_chunks=6, seconds=60, then=text("a long answer that is cut")), text("later"))
    assert nexus("agents", "add", "coder").returncode == 0
    waiting = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "coder", "long job", "--wait", "--timeout", "120"],
        env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert waiting.stdout is not None
        assert waiting.stdout.read(2) == "a "  # the reply streams, then the model goes quiet
        waiting.send_signal(signal.SIGTERM)
        _, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 143, err
    assert "nexus: terminated" in err and "Traceback" not in err, err
    listed = nexus("queue", "list", "coder", "--all", "--json")
    (item,) = json.loads(listed.stdout)
    assert (item["status"], item["turn_status"]) == ("delivered", "aborted"), item  # written by this process
    assert "recover()" not in (item["turn_error"] or ""), item  # not closed later as a crash
    history = nexus("sessions", "history", "agent:coder")
    assert "a long an" in history.stdout, history.stdout  # the partial reply is kept
    again = nexus("send", "coder", "short one", "--wait", "--timeout", "60")  # nothing left holding the agent
    assert (again.returncode, again.stdout.strip()) == (0, "later"), again.stderr
