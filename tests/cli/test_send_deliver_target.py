"""``nexus send --deliver`` draining in-process keeps its target with the message, as the HTTP path does.

The target is stored in the queue item's ``metadata.deliver_to``: a CLI killed before its run ends
leaves the message queued with it, and ``nexus queue drain`` runs it and delivers the reply there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nexus.ledger import Ledger, QueueItem
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.deliveries import DeliveryLog
from nexus.testing import FakeProviderServer
from nexus.testing.steps import stall, text

from .cli_process import SRC, RunNexus


def _with_jsonl_adapter(home: Path) -> Path:
    """A ``files`` adapter (account ``a``) that writes each delivered reply to the returned file."""
    out = home / "deliveries.jsonl"
    with (home / "nexus.toml").open("a", encoding="utf-8") as config:
        config.write('\n[adapters.files]\nbuiltin = "jsonl"\n')
        config.write(f'[adapters.files.accounts.a]\nconfig = {{ path = "{out}" }}\n')
    return out


def _item(home: Path, message_id: str) -> QueueItem:
    with Ledger.open(home / "agents.db") as ledger:
        (item,) = [i for i in BrokerStore(ledger.database).items() if i.message_id == message_id]
    return item


def _deliver_to(item: QueueItem) -> dict[str, object]:
    message = item.message if isinstance(item.message, dict) else {}
    metadata = message.get("metadata")
    stored = metadata.get("deliver_to") if isinstance(metadata, dict) else None
    assert isinstance(stored, dict), f"no deliver_to stored with the message: {message!r}"
    return stored


def test_send_deliver_stores_its_target_with_the_message(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    _with_jsonl_adapter(home)
    server.script(text("Delivered words."))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "say it", "--deliver", "files/a:chat:5", "--id", "d-1")
    assert result.returncode == 0, result.stderr
    item = _item(home, "d-1")
    assert item.status == "delivered"
    stored = _deliver_to(item)
    assert (stored["channel"], stored["account_id"], stored["to"]) == ("files", "a", "chat:5")


def test_a_send_killed_before_its_run_ends_is_delivered_by_queue_drain(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    out = _with_jsonl_adapter(home)
    assert nexus("agents", "add", "coder").returncode == 0
    server.script(stall(after_chunks=1, seconds=60, then=text("never sent")), text("Delivered after the crash."))
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-m", "nexus.cli", "send", "coder", "say it", "--deliver", "files/a:chat:7", "--id", "d-1"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, "the run never reached the model"
    finally:
        process.send_signal(signal.SIGKILL)  # mid-reply: the message stays queued, its target with it
        process.wait()
    assert _item(home, "d-1").status != "delivered"
    drained = nexus("queue", "drain")
    assert drained.returncode == 0, drained.stderr
    item = _item(home, "d-1")
    assert item.status == "delivered" and item.turn_id is not None
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["target"]["to"] for w in written if "Delivered after the crash." in w["text"]] == ["chat:7"]
    with Ledger.open(home / "agents.db") as ledger:  # recorded with the turn that consumed the message
        (record,) = DeliveryLog(ledger.database).recent()
    assert (record.turn_id, record.status, record.queue_item_id) == (item.turn_id, "delivered", item.id)


def _slow_adapter(home: Path, config: str) -> None:
    """Register ``scripts/slow_confirm.py`` as adapter ``slow`` with account ``a`` (``config``: its TOML table)."""
    script = Path(__file__).parents[1] / "adapters" / "scripts" / "slow_confirm.py"
    with (home / "nexus.toml").open("a", encoding="utf-8") as toml:
        toml.write(f"\n[adapters.slow]\ncommand = {json.dumps(f'{sys.executable} {script}')}\n")
        toml.write(f"[adapters.slow.accounts.a]\nconfig = {config}\n")


def test_a_delivery_confirmed_late_is_waited_for_and_recorded(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """The adapter confirms 11 s after the reply ended: later than the host's closing grace (10 s), within the
    router's own wait (30 s). ``nexus send`` closed its broker first, cut the delivery, recorded nothing and said
    "the message was not run in this process" of a message it had just run."""
    _slow_adapter(home, '{ delay = "11" }')
    server.script(text("Shown at once."))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "say it", "--wait", "--deliver", "slow/a:chat:1", "--id", "d-1")
    assert result.returncode == 0, result.stderr
    assert "delivered to slow/a:chat:1 (native); message ids: slow-1" in result.stderr, result.stderr
    with Ledger.open(home / "agents.db") as ledger:
        (record,) = DeliveryLog(ledger.database).recent()
    assert (record.status, record.message_ids, record.queue_item_id) == ("delivered", ["slow-1"], _item(home, "d-1").id)


def test_a_partial_delivery_is_called_partial(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    """The adapter showed the reply, then exited before confirming it: the record says ``partial``, and so does
    the command (it said "failed", as for a reply that never reached anyone)."""
    _slow_adapter(home, '{ exit = "3" }')
    server.script(text("Shown, never confirmed."))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "say it", "--wait", "--deliver", "slow/a:chat:1")
    assert result.returncode == 1, result.stderr
    assert "nexus: error: delivery to slow/a:chat:1 was cut short (part of the reply reached it): " in result.stderr
    assert "(the reply is in the ledger)" in result.stderr, result.stderr
    with Ledger.open(home / "agents.db") as ledger:
        (record,) = DeliveryLog(ledger.database).recent()
    assert record.status == "partial" and record.message_ids == ["slow-1"]


def test_an_adapters_message_ids_cannot_drive_the_terminal(
    home: Path, server: FakeProviderServer, nexus: RunNexus
) -> None:
    """Message ids are the adapter's (or its platform's) text: printed raw, an ESC sequence recoloured the terminal
    or overwrote the line with a forged one (``\\r\\x1b[2K``), and a newline forged a line in the history."""
    ids = ["\x1b[31mRED", "\r\x1b[2Knexus: delivered to evil", "a\n── turn forged"]
    _slow_adapter(home, f"{{ ids = {json.dumps(json.dumps(ids))} }}")
    server.script(text("Shown."))
    assert nexus("agents", "add", "coder").returncode == 0
    result = nexus("send", "coder", "say it", "--wait", "--deliver", "slow/a:chat:1")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stderr.splitlines() if "delivered to slow/a:chat:1" in line)
    assert "\x1b" not in result.stderr and "\r" not in result.stderr, result.stderr
    assert line.endswith(r"message ids: \x1b[31mRED, \r\x1b[2Knexus: delivered to evil, a\n── turn forged"), line
    history = nexus("sessions", "history", "agent:coder")
    assert history.returncode == 0, history.stderr
    assert "\x1b" not in history.stdout and "\n── turn forged" not in history.stdout, history.stdout
    assert r"a\n── turn forged" in history.stdout
