"""``nexus send AGENT TEXT --session KEY`` as a real process: the message runs in that per-sender session."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from nexus.broker.sessions import session_label_for
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

from .cli_process import RunNexus


def test_send_with_a_session_key_runs_in_the_agents_session_of_that_key(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    server.script(text("hello, 42"))
    assert nexus("agents", "add", "support").returncode == 0
    result = nexus("send", "support", "hi", "--session", "dm:telegram:42", "--id", "m-1", "--wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello, 42\n"
    label = session_label_for("support", "agent:support", "dm:telegram:42")
    assert label == "support~dm~telegram~42"  # the same mapping as inbound chat messages
    with Ledger.open(home / "agents.db") as ledger:
        (turn,) = run_inline(ledger.turns.path(label))
        (item,) = BrokerStore(ledger.database).items()
        assert (item.session_label, item.status, item.turn_id) == (label, "delivered", turn.id)
        assert run_inline(ledger.turns.path("agent:support")) == []


def test_with_another_drainer_the_session_key_is_kept_in_the_queued_row(home: Path, nexus: RunNexus) -> None:
    nexus("agents", "add", "support")
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # "a drain" holds the broker lock: the row is written for it
    try:
        result = nexus("send", "support", "later", "--session", "group:slack:C1", "--json")
    finally:
        os.close(lock)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "queued"
    with Ledger.open(home / "agents.db") as ledger:
        (item,) = BrokerStore(ledger.database).items()
    assert item.session_label == session_label_for("support", "agent:support", "group:slack:C1")
    assert isinstance(item.message, dict) and item.message["session"] == "group:slack:C1"
    listed = nexus("queue", "list", "support", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "group:slack:C1" in listed.stdout  # nexus queue list shows the session


def test_a_bad_session_key_exits_2_and_queues_nothing(home: Path, nexus: RunNexus) -> None:
    nexus("agents", "add", "support")
    for key in ("", "  ", "a\tb", "k" * 600):
        result = nexus("send", "support", "hi", "--session", key)
        assert result.returncode == 2, (key, result.stderr)
        assert "--session" in result.stderr and "Traceback" not in result.stderr
    with Ledger.open(home / "agents.db") as ledger:
        assert BrokerStore(ledger.database).items() == []
