"""``nexus serve`` as a real process: start, server.json, nexus send over HTTP, SIGTERM mid-run, refusals."""

from __future__ import annotations

import json
import signal
import socket
import stat
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall

from .serve_proc import nexus, serving, write_config

TOKEN = "t0ken-for-tests"

pytestmark = pytest.mark.slow  # real processes: a few seconds each


def _nexus(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return nexus(home, *args, timeout=timeout, env={"NEXUS_TOKEN": TOKEN})


def _serving(home: Path, *args: str) -> AbstractContextManager[tuple[subprocess.Popen[str], str]]:
    """``nexus serve --port 0`` with ``NEXUS_TOKEN`` set (``tokens = ["${NEXUS_TOKEN}"]`` reads it)."""
    return serving(home, *args, env={"NEXUS_TOKEN": TOKEN})


_write_config = write_config


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    return stderr


def _lock_is_free(home: Path) -> bool:
    from nexus.broker.host import broker_lock
    from nexus.config import load_config

    with broker_lock(load_config(str(home / "nexus.toml"))) as held:
        return held


def test_serve_announces_itself_nexus_send_talks_to_it_and_sigterm_stops_cleanly(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider, 'tokens = ["${NEXUS_TOKEN}"]')
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            announced = isolated_env / "server.json"
            assert stat.S_IMODE(announced.stat().st_mode) == 0o600
            assert json.loads(announced.read_text())["pid"] == process.pid
            assert httpx.get(f"{url}/v1/agents").status_code == 401  # the token is required
            sent = _nexus(isolated_env, "send", "coder", "hello over http", "--wait", "--timeout", "30")
            assert sent.returncode == 0, sent.stderr
            assert "sent to the running nexus serve" in sent.stderr and sent.stdout.strip().endswith("hello over http")
            cleared = _nexus(isolated_env, "queue", "clear", "coder")
            assert cleared.returncode == 0 and "via nexus serve" in cleared.stdout, cleared.stderr
            added = _nexus(isolated_env, "agents", "add", "helper")
            assert added.returncode == 0 and "via nexus serve" in added.stdout, added.stderr
            agents = httpx.get(f"{url}/v1/agents", headers={"authorization": f"Bearer {TOKEN}"}).json()["agents"]
            assert [a["id"] for a in agents] == ["coder", "helper"]
            stderr = _stop(process)
        assert "stopping" in stderr and "Traceback" not in stderr
    assert not (isolated_env / "server.json").exists() and _lock_is_free(isolated_env)


def test_sigterm_mid_run_writes_the_turn_aborted_and_the_backlog_runs_on_the_next_start(isolated_env: Path) -> None:
    with FakeProviderServer(stall(after_chunks=3, seconds=60), default=echo, chunk_chars=2) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            first = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": "long job", "id": "m-1"})
            second = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": "next job", "id": "m-2"})
            assert first.status_code == second.status_code == 202
            deadline = time.monotonic() + 30
            while httpx.get(f"{url}/v1/agents/coder").json()["state"] != "streaming":
                assert time.monotonic() < deadline, "the run never streamed"
                time.sleep(0.05)
            _stop(process)
        with Ledger.open(isolated_env / "agents.db") as ledger:
            (turn,) = run_inline(ledger.turns.path("agent:coder"))
            assert turn.status == "aborted" and run_inline(ledger.turns.open_turns()) == []
            store = BrokerStore(ledger.database)
            item_1 = store.get_item(first.json()["queue_item_id"])
            item_2 = store.get_item(second.json()["queue_item_id"])
            assert item_1 is not None and (item_1.status, item_1.turn_id) == ("delivered", turn.id)
            assert item_2 is not None and item_2.status == "queued"  # durable: waits for the next start
        with _serving(isolated_env) as (process, url):
            deadline = time.monotonic() + 30
            while (item := httpx.get(f"{url}/v1/agents/coder/queue").json()["items"]) and item[0]["status"] != "failed":
                assert time.monotonic() < deadline, item
                time.sleep(0.05)
            _stop(process)
        with Ledger.open(isolated_env / "agents.db") as ledger:
            turns = run_inline(ledger.turns.path("agent:coder"))
            assert [t.status for t in turns] == ["aborted", "completed"]
            done = BrokerStore(ledger.database).get_item(second.json()["queue_item_id"])
            assert done is not None and (done.status, done.turn_id) == ("delivered", turns[1].id)


def test_refusals_non_loopback_without_token_unset_token_a_second_server_and_a_taken_port(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider)
        open_bind = _nexus(isolated_env, "serve", "--host", "0.0.0.0", "--port", "0")
        assert open_bind.returncode == 2 and "without a token" in open_bind.stderr
        assert "Traceback" not in open_bind.stderr and not (isolated_env / "server.json").exists()
        with _serving(isolated_env) as (process, _):
            second = _nexus(isolated_env, "serve", "--port", "0")
            assert second.returncode == 1 and "another process already drains" in second.stderr
            drain = _nexus(isolated_env, "queue", "drain")
            assert drain.returncode == 1
            _stop(process)
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = _nexus(isolated_env, "serve", "--port", str(taken.getsockname()[1]))
        assert busy.returncode == 1 and "cannot listen" in busy.stderr and "Traceback" not in busy.stderr
        assert _lock_is_free(isolated_env) and not (isolated_env / "server.json").exists()
        out_of_range = _nexus(isolated_env, "serve", "--port", "70000")
        assert out_of_range.returncode == 2 and "0-65535" in out_of_range.stderr
        _write_config(isolated_env, provider, 'tokens = ["${NEXUS_UNSET_TOKEN}"]')
        unset = _nexus(isolated_env, "serve", "--port", "0")
        assert unset.returncode == 2 and "NEXUS_UNSET_TOKEN" in unset.stderr
        _write_config(isolated_env, provider, 'tokens = ["ok-token", " "]')  # it served 0.0.0.0 behind " " alone
        blank = _nexus(isolated_env, "serve", "--host", "0.0.0.0", "--port", "0")
        assert blank.returncode == 2 and "token 2 has spaces at its ends" in blank.stderr, blank.stderr
        assert not (isolated_env / "server.json").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.1.2.3"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    from nexus.cli.serve_cmd import is_loopback

    assert is_loopback(host) and not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_sigterm_while_a_chat_completion_streams_in_another_session(isolated_env: Path) -> None:
    with FakeProviderServer(stall(after_chunks=4, seconds=60), default=echo, chunk_chars=2) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            body = {"model": "coder", "stream": True, "messages": [{"role": "user", "content": "a long story"}]}
            headers = {"x-nexus-session": "side"}
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers, timeout=30) as reply:
                assert reply.status_code == 200
                lines = reply.iter_lines()
                for line in lines:
                    if '"content":"' in line and '"content":""' not in line:
                        break  # the model is streaming (and now stalls)
                process.send_signal(signal.SIGTERM)
                rest = list(lines)  # the stream ends: the aborted turn still answers
            _, stderr = process.communicate(timeout=30)
            assert process.returncode == 0, stderr
        assert [line for line in rest if line][-1] == "data: [DONE]", rest  # the stream was ended, not cut
    with Ledger.open(isolated_env / "agents.db") as ledger:
        (turn,) = run_inline(ledger.turns.path("side"))
        assert turn.status == "aborted" and run_inline(ledger.turns.open_turns()) == []


def test_every_message_accepted_before_a_sigkill_is_in_the_ledger(isolated_env: Path) -> None:
    """The 202 means committed: WAL checkpoints run on their own thread, and a SIGKILL still loses nothing."""
    with FakeProviderServer(stall(after_chunks=1, seconds=60), default=echo) as provider:
        _write_config(isolated_env, provider, 'tokens = ["${NEXUS_TOKEN}"]')
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with (
            _serving(isolated_env) as (process, url),
            httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}) as client,
        ):
            accepted = []
            for n in range(400):  # ~2,000 WAL pages: the checkpoint thread copies some while they arrive
                reply = client.post("/v1/agents/coder/messages", json={"content": f"task {n} " + "x" * 3000})
                assert reply.status_code == 202, reply.text
                accepted.append(reply.json()["queue_item_id"])
            process.kill()
            process.wait()
    with Ledger.open(isolated_env / "agents.db") as ledger:
        assert ledger.database.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {item.id for item in BrokerStore(ledger.database).items(agent_id="coder")}
    assert set(accepted) <= stored
