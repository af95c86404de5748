"""Many ``nexus send`` processes at once against one ``$NEXUS_HOME`` with no server running.

One of them takes the broker lock and drains its own conversation; the others only queue
their message for "that broker". A message is accepted durably, so it must also run: nobody
may exit leaving an accepted message ``queued`` with no process left to drain it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

from .fake_config import write_fake_config

SRC = Path(__file__).resolve().parents[2] / "src"
AGENTS = ("a1", "a2", "a3", "a4")
SENDS = 16


def test_concurrent_sends_leave_no_message_stranded(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo, chunk_delay=0.01) as server:
        write_fake_config(isolated_env, server)
        env = {**os.environ, "PYTHONPATH": str(SRC), "NEXUS_HOME": str(isolated_env)}
        for agent in AGENTS:
            added = subprocess.run(
                [sys.executable, "-m", "nexus.cli", "agents", "add", agent],
                env=env, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "nexus.cli", "send", AGENTS[i % len(AGENTS)], f"message {i}", "--id", f"m{i}"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(SENDS)
        ]
        for proc in procs:
            _out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
    with Ledger.open(isolated_env / "agents.db") as ledger:
        statuses = {str(item.message_id): item.status for item in BrokerStore(ledger.database).items()}
    assert len(statuses) == SENDS
    stranded = sorted(m for m, status in statuses.items() if status != "delivered")
    assert stranded == [], f"accepted but never run after every process exited: {stranded}"
