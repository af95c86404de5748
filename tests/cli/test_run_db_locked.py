"""Another process holds agents.db (``BEGIN EXCLUSIVE``) while a run replies.

Issue 8 item 4: the run ended in a traceback chain, and the next start labelled the turn "the
process died mid-reply", which was untrue. Now the run says it is waiting for the database,
gives up after ``NEXUS_DB_WAIT_S`` with one clear line, and the turn reaches the ledger later
with its true status.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .fake_config import write_fake_config

SRC = Path(__file__).resolve().parents[2] / "src"
REPLY = "the answer, all of it"

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
sys.stdin.readline()  # started ahead, so taking the lock is quick when the test says so
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.execute("ROLLBACK")
"""


def _env(home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    extra = {"NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "TMPDIR": str(tmp)}
    return {**env, **extra, "NEXUS_DB_WAIT_S": "2"}


def _nexus(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_database_held_by_another_process_is_waited_for_then_reported(isolated_env: Path, tmp_path: Path) -> None:
    home, tmp = isolated_env, tmp_path / "tmp"
    tmp.mkdir()
    env = _env(home, tmp)
    taken = threading.Event()  # the reply stalls until the database is held, however slow the machine
    with FakeProviderServer(text("one"), stall(after_chunks=2, seconds=120, then=text(REPLY), release=taken)) as server:
        write_fake_config(home, server)
        assert _nexus(env, "run", "first").returncode == 0
        run = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "run", "second"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(home / "agents.db")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdin is not None and holder.stdout is not None
        try:
            deadline = time.monotonic() + 60
            while len(server.requests) < 2:  # the turn is open, the reply stalls: now the database is taken
                assert run.poll() is None and time.monotonic() < deadline, run.communicate()
                time.sleep(0.05)
            holder.stdin.write("go\n")
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "held"
            taken.set()
            out, err = run.communicate(timeout=120)
        finally:
            holder.communicate(timeout=30)  # closes its stdin: it lets go of the database
            if run.poll() is None:
                run.kill()
                run.communicate()

    assert run.returncode == 1, err
    assert out.strip() == REPLY
    assert "Traceback" not in err, err
    assert "waiting for the database (held by another process)" in err
    lines = [line for line in err.splitlines() if "could not save turn" in line]
    assert len(lines) == 1 and "held by another process" in lines[0] and "NEXUS_DB_WAIT_S" in lines[0], err
    found = re.search(r"the reply is kept in (\S+\.json)", lines[0])
    assert found is not None and json.loads(Path(found[1]).read_text())["text"] == REPLY

    history = _nexus(env, "sessions", "history", "main")
    assert history.returncode == 0, history.stderr
    assert REPLY in history.stdout and "died mid-reply" not in history.stdout
    # the turn came back from its rescue file as completed: the notice says so, not "as aborted"
    assert "closed 1 turn left open by a stopped process (as completed)" in history.stderr, history.stderr
    with Ledger.open(home / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
    assert [(t.status, t.stop_reason) for t in turns][-1] == ("completed", "end_turn")
