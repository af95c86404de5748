"""``nexus send --deliver`` to a running ``nexus serve`` (real processes): the server delivers and records it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger.deliveries import DeliveryLog
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

from .test_serve_process import _nexus, _serving, _stop, _write_config

pytestmark = pytest.mark.slow  # real processes: a few seconds


def _write_config_with_jsonl_adapter(home: Path, provider: FakeProviderServer, out: Path) -> None:
    """The fake provider's config plus a ``files`` adapter (account ``a``) writing to ``out``."""
    _write_config(home, provider)
    with (home / "nexus.toml").open("a", encoding="utf-8") as config:
        config.write('\n[adapters.files]\nbuiltin = "jsonl"\n')
        config.write(f'[adapters.files.accounts.a]\nconfig = {{ path = "{out}" }}\n')


def test_send_deliver_goes_through_the_running_server_and_history_shows_where_the_reply_went(
    isolated_env: Path,
) -> None:
    out = isolated_env / "out.jsonl"
    with FakeProviderServer(default=echo) as provider:
        _write_config_with_jsonl_adapter(isolated_env, provider, out)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, _):
            sent = _nexus(isolated_env, "send", "coder", "ping via adapter", "--deliver", "files/a:chat:5", "--wait")
            assert sent.returncode == 0, sent.stderr
            assert "the server delivers the reply to files/a:chat:5" in sent.stderr
            deadline = time.monotonic() + 30
            while not out.exists() or not out.read_text().strip():
                assert time.monotonic() < deadline, "the adapter got nothing"
                time.sleep(0.05)
            bad = _nexus(isolated_env, "send", "coder", "x", "--deliver", "files/zzz:chat:5")
            assert bad.returncode == 2 and "has no account 'zzz'" in bad.stderr
            stderr = _stop(process)  # waits for the delivery to be recorded, stops the adapter
        assert "Traceback" not in stderr
        history = _nexus(isolated_env, "sessions", "history", "agent:coder")
    (written,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert "ping via adapter" in written["text"] and written["target"]["to"] == "chat:5"
    with Ledger.open(isolated_env / "agents.db") as ledger:
        (record,) = DeliveryLog(ledger.database).recent()
    assert record.status == "delivered" and record.message_ids == [written["message_id"]]
    assert history.returncode == 0, history.stderr
    assert f"⇢ delivered to files/a:chat:5 (native); message ids: {written['message_id']}" in history.stdout


def test_a_deliver_target_given_over_http_survives_a_restart_of_the_server(isolated_env: Path) -> None:
    """The message waits behind a long run when the server stops; the next server runs it and still delivers."""
    import httpx

    from nexus.ledger.broker_store import BrokerStore
    from nexus.testing.steps import stall

    out = isolated_env / "out.jsonl"
    with FakeProviderServer(default=echo) as provider:
        _write_config_with_jsonl_adapter(isolated_env, provider, out)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        provider.script(stall(after_chunks=1, seconds=60))  # the first run holds the agent until the server stops
        with _serving(isolated_env) as (process, url):
            busy = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": "long job"}, timeout=30)
            assert busy.status_code == 202, busy.text
            deadline = time.monotonic() + 30
            while not provider.requests:
                assert time.monotonic() < deadline, "the long run never reached the model"
                time.sleep(0.05)
            sent = httpx.post(
                f"{url}/v1/agents/coder/messages",
                json={"content": "ping after restart", "id": "m-2", "mode": "followup", "deliver": "files/a:chat:7"},
                timeout=30,
            )
            assert sent.status_code == 202, sent.text
            _stop(process)  # the long run is aborted; m-2 stays queued with its target
        with Ledger.open(isolated_env / "agents.db") as ledger:
            (item,) = [i for i in BrokerStore(ledger.database).items() if i.message_id == "m-2"]
            assert item.status == "queued"
        assert not out.exists() or not out.read_text().strip()
        with _serving(isolated_env) as (process, _):  # a new process: nothing of the first is in memory
            deadline = time.monotonic() + 30
            while not out.exists() or not out.read_text().strip():
                assert time.monotonic() < deadline, "the restarted server did not deliver the reply"
                time.sleep(0.05)
            stderr = _stop(process)
        assert "Traceback" not in stderr
    (written,) = [json.loads(line) for line in out.read_text().splitlines()]  # delivered once
    assert "ping after restart" in written["text"] and written["target"]["to"] == "chat:7"
    with Ledger.open(isolated_env / "agents.db") as ledger:
        (record,) = DeliveryLog(ledger.database).recent()
        item = BrokerStore(ledger.database).get_item(sent.json()["queue_item_id"])
    assert item is not None and item.status == "delivered"
    assert record.status == "delivered" and record.turn_id == item.turn_id
