"""``nexus queue drain`` and ``nexus adapters monitor`` stopped while their PostgreSQL server has gone silent say
what the stop abandoned, and exit non-zero, as ``nexus serve`` does (``test_serve_postgres_silent``).

Their stop has the same bound (``STOP_WAIT_S`` after the signal: the host's close tells the ledger it is stopping)
and cut the connections a silent server never answered the same way, but said nothing of it: the drain printed
only "nexus: terminated", and the monitor its usual "stopping" line and exited 0, as if every write had been made.

Real processes, a real signal and real PostgreSQL, behind a proxy this test silences (:mod:`.pg_silent`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall, text

from .pg_silent import SilentProxy
from .serve_proc import nexus, serve_env, write_config

pytestmark = pytest.mark.slow  # real processes and a real PostgreSQL

EXIT_WAIT_S = 60
"""How long the test waits for the stopped command: the stop's bound (10 s), with room for a loaded machine."""

RUN_WAIT_S = 120
INBOX = Path(__file__).resolve().parents[1] / "adapters" / "scripts" / "inbox.py"


def _monitored(home: Path, tmp_path: Path) -> None:
    """An enabled account of the example inbox adapter, monitored (its inbox stays empty: the message to run is
    queued before the monitor starts, and its broker runs it at start)."""
    inbox = tmp_path / "inbox.jsonl"
    inbox.touch()
    with (home / "nexus.toml").open("a", encoding="utf-8") as config:
        config.write(
            f'\n[adapters.inbox]\ncommand = "{sys.executable} {INBOX}"\n'
            '[adapters.inbox.accounts.main]\nmonitor = true\nagent = "coder"\n'
            f'config = {{ inbox = "{inbox}", outbox = "{tmp_path / "out.jsonl"}" }}\n'
        )


def _queued_not_run(url: str) -> None:
    """A message for ``coder`` stored in the queue as another process's ``nexus send`` leaves it (nothing ran it)."""
    from nexus.broker import AgentMessage
    from nexus.ledger import AcceptRequest, Ledger

    async def accept() -> None:
        async with await Ledger.connect(url) as ledger:
            agent = await ledger.agents.get("coder")
            assert agent is not None
            message = AgentMessage(id="m-1", from_="user", to="coder", content="first message")
            await ledger.queue.accept(
                AcceptRequest("coder", agent.session_label, message.id, "user", message.to_json(), "followup")
            )

    asyncio.run(accept())


@pytest.mark.parametrize(
    ("command", "code"),
    [(("queue", "drain"), 143), (("adapters", "monitor"), 1)],
    ids=["queue-drain", "adapters-monitor"],
)
def test_a_command_stopped_while_postgresql_is_silent_says_what_it_abandoned_and_fails(
    command: tuple[str, ...], code: int, postgres_url: str, isolated_env: Path, tmp_path: Path
) -> None:
    home = isolated_env
    release = threading.Event()
    with FakeProviderServer(
        stall(after_chunks=1, seconds=300, then=text("late"), release=release), default=echo
    ) as provider:
        write_config(home, provider, broker="lease_ttl_ms = 3000")
        if command[0] == "adapters":
            _monitored(home, tmp_path)
        with SilentProxy(postgres_url) as proxy:
            env = {"NEXUS_DATABASE_URL": proxy.url}
            assert nexus(home, "agents", "add", "coder", env=env, timeout=120).returncode == 0
            _queued_not_run(postgres_url)
            process = subprocess.Popen(
                [sys.executable, "-m", "nexus.cli", *command], env=serve_env(home, **env),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + RUN_WAIT_S
                while not provider.requests:
                    assert process.poll() is None, process.communicate()[1]
                    assert time.monotonic() < deadline, "the run never reached the model"
                    time.sleep(0.1)
                proxy.silence()  # the run is streaming: its writes from now on go unanswered
                process.send_signal(signal.SIGTERM)
                try:
                    _, stderr = process.communicate(timeout=EXIT_WAIT_S)
                except subprocess.TimeoutExpired:
                    raise AssertionError(f"not exited {EXIT_WAIT_S} s after SIGTERM") from None
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        release.set()
    assert "Traceback" not in stderr, stderr
    assert process.returncode == code, stderr
    said = f"nexus {' '.join(command)}: stopped, but the ledger database did not answer by the stop's deadline"
    assert said in stderr and "abandoned" in stderr, stderr
    with psycopg.connect(postgres_url) as conn:  # nothing lost: the cut run's message waits for the next start
        assert conn.execute("SELECT status FROM queue_items").fetchall() == [("processing",)]
