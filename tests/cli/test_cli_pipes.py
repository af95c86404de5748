"""``nexus run … | head``: a closed stdout aborts the run quietly (exit 141), the partial reply is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

SRC = Path(__file__).resolve().parents[2] / "src"
REPLY = " ".join(f"word{i}" for i in range(400))


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(chunk_delay=0.01) as fake:
        yield fake


def _piped(home: Path, *args: str) -> tuple[int, str]:
    """Run ``nexus ARGS | head -c 5`` as a shell would: our side exits when the reader has closed the pipe."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(NEXUS_HOME=str(home), PYTHONPATH=str(SRC), NO_COLOR="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = proc.stdout.read(5)
        assert first, proc.stderr.read().decode()
        proc.stdout.close()  # what `head -c 5` does once it has its bytes
        err = proc.stderr.read().decode()
        return proc.wait(timeout=60), err
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("json_mode", [False, True])
def test_closed_stdout_aborts_quietly_and_keeps_the_partial_reply(
    home: Path, server: FakeProviderServer, json_mode: bool
) -> None:
    server.script(text(REPLY))
    code, err = _piped(home, "run", *(["--json"] if json_mode else []), "hi")
    assert code == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "raised" not in err, err
    assert "Exception ignored" not in err, err
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["aborted"]
        history = run_inline(ledger.turns.history("main"))
    last = history[-1]
    assert isinstance(last, AssistantMessage)
    assert last.text and REPLY.startswith(last.text) and len(last.text) < len(REPLY)
