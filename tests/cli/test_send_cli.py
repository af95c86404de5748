"""``nexus send`` and ``nexus queue drain`` as real processes against the loopback fake provider."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from conftest import RunNexus
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text


def _items(home: Path) -> list[tuple[str | None, str]]:
    with Ledger.open(home / "agents.db") as ledger:
        return [(item.message_id, item.status) for item in BrokerStore(ledger.database).items()]


def test_send_wait_prints_the_reply_and_records_the_turn(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    server.script(text("Hello, I am the coder."))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "introduce yourself", "--id", "m-1", "--wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello, I am the coder.\n"
    assert "accepted m-1" in result.stderr
    with Ledger.open(home / "agents.db") as ledger:
        (turn,) = ledger.turns("agent:coder")
        (item,) = BrokerStore(ledger.database).items()
        assert (item.status, item.turn_id) == ("delivered", turn.id)
    again = nexus("send", "coder", "introduce yourself", "--id", "m-1", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "delivered"
    assert "already accepted" not in again.stdout  # --json prints only the object
    assert len(server.requests) == 1  # the duplicate id did not run again


def test_send_json_reports_the_outcome(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    server.script(text("done"))
    nexus("agents", "add", "coder")
    result = nexus("send", "coder", "do it", "--json")
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "delivered" and outcome["reply"] == "done" and outcome["turn_id"]


def test_bad_input_exits_2_and_queues_nothing(home: Path, nexus: RunNexus) -> None:
    nexus("agents", "add", "coder")
    for argv, expected in (
        (["send", "ghost", "hi"], "unknown agent 'ghost' (known: coder)"),
        (["send", "coder", "hi", "--mode", "later"], "unknown queue mode 'later'"),
        (["send", "coder", "hi", "--from", "nobody"], "--from 'nobody' is not a registered agent"),
        (["send", "coder", "hi", "--from", "coder"], "cannot send a message to itself"),
        (["send", "coder", "   "], "empty"),
    ):
        result = nexus(*argv)
        assert result.returncode == 2, (argv, result.stderr)
        assert expected in result.stderr and "Traceback" not in result.stderr
    assert _items(home) == []


def test_with_another_drainer_the_message_waits_for_it(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    nexus("agents", "add", "coder")
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)  # "a server" holds the broker lock
    try:
        result = nexus("send", "coder", "later please", "--id", "m-9")
        assert result.returncode == 0 and "another process holds the broker lock" in result.stderr
        assert _items(home) == [("m-9", "queued")] and server.requests == []
        busy = nexus("queue", "drain")
        assert busy.returncode == 1 and "another process is draining" in busy.stderr
    finally:
        os.close(lock)
    server.script(text("ran at last"))
    drained = nexus("queue", "drain")
    assert drained.returncode == 0, drained.stderr
    assert _items(home) == [("m-9", "delivered")]


def test_wait_takes_over_when_the_other_broker_goes_away(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    import subprocess
    import sys
    import time

    # not `from conftest import SRC`: which conftest module that is depends on the order of the run
    src = Path(__file__).resolve().parents[2] / "src"

    nexus("agents", "add", "coder")
    server.script(text("ran here"))
    lock = os.open(home / "broker.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(src)}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "coder", "hello", "--wait", "--timeout", "60"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while _items(home) == [] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [status for _, status in _items(home)] == ["queued"]
    finally:
        os.close(lock)  # "the server" stops
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out == "ran here\n"
