"""Two brokers on one database run no message twice, under whatever name each reaches it (real processes).

``h2/agents.db`` a symlink to ``h1/agents.db`` gave each ``nexus queue drain`` its own ``broker.lock``
(beside the name, not the file): 40 messages, 57 completed turns. The lock now lives beside the real
file; a hard link, which SQLite itself treats as a second database, is refused; and when the lock
cannot see the other broker (its file removed while held), the claim refuses the items it runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from broker_homes import start_drain, write_home

from nexus.cli._lock import LOCK_HELD
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import AcceptRequest, BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

AGENTS = 4
MESSAGES = 24


def _accept(home: Path) -> None:
    with Ledger.open(home / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        for n in range(AGENTS):
            store.save_agent(f"a{n}", role="worker", session_label=f"agent:a{n}", spec={})
        requests = []
        for n in range(MESSAGES):
            agent = f"a{n % AGENTS}"
            body = {"id": f"m{n}", "from": "user", "to": agent, "content": f"msg-{n:03d}"}
            requests.append(AcceptRequest(agent, f"agent:{agent}", f"m{n}", "user", body, "followup"))
        store.accept_many(requests)


def _wait_until_running(home: Path, drain: subprocess.Popen[str]) -> None:
    """Until the drain has claimed a message (a run is under way), so a second one starts beside it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert drain.poll() is None, drain.communicate()
        with Ledger.open(home / "agents.db") as ledger:
            if any(item.status == "processing" for item in BrokerStore(ledger.database).pending()):
                return
        time.sleep(0.02)
    raise AssertionError("the first drain never started a run")


def _completed_per_message(home: Path) -> Counter[str]:
    """How many completed turns read each message (each must be read by exactly one)."""
    seen: Counter[str] = Counter()
    with Ledger.open(home / "agents.db") as ledger:
        for n in range(AGENTS):
            for turn in run_inline(ledger.turns.path(f"agent:a{n}")):
                if turn.status != "completed":
                    continue
                for stored in run_inline(ledger.turns.messages(turn.id)):
                    if stored.role == "user":
                        seen.update(part for part in str(stored.message.content).split() if part.startswith("msg-"))
        assert {item.status for item in BrokerStore(ledger.database).items()} == {"delivered"}
    return seen


@pytest.fixture
def slow_server() -> FakeProviderServer:
    """Replies that stream for a while, so the second drain starts while the first one runs."""
    with FakeProviderServer(default=echo, chunk_chars=2, chunk_delay=0.02) as server:
        yield server


def test_a_drain_through_a_symlinked_database_is_refused_while_one_runs(
    tmp_path: Path, slow_server: FakeProviderServer
) -> None:
    h1, h2 = write_home(tmp_path / "h1", slow_server), write_home(tmp_path / "h2", slow_server)
    _accept(h1)
    (h2 / "agents.db").symlink_to(h1 / "agents.db")
    first = start_drain(h1)
    _wait_until_running(h1, first)
    second = start_drain(h2)
    _, refused = second.communicate(timeout=120)
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    assert (second.returncode, refused.splitlines()) == (1, [f"nexus: error: {LOCK_HELD}"])
    seen = _completed_per_message(h1)
    assert seen == Counter({f"msg-{n:03d}": 1 for n in range(MESSAGES)})


def test_a_symlinked_home_directory_shares_the_lock(tmp_path: Path, slow_server: FakeProviderServer) -> None:
    h1 = write_home(tmp_path / "h1", slow_server)
    _accept(h1)
    (tmp_path / "h2").symlink_to(h1, target_is_directory=True)
    first = start_drain(h1)
    _wait_until_running(h1, first)
    second = start_drain(tmp_path / "h2")
    _, refused = second.communicate(timeout=120)
    first.communicate(timeout=300)
    assert second.returncode == 1 and LOCK_HELD in refused
    assert _completed_per_message(h1) == Counter({f"msg-{n:03d}": 1 for n in range(MESSAGES)})


def test_a_hard_linked_database_is_refused_before_anything_runs(
    tmp_path: Path, slow_server: FakeProviderServer
) -> None:
    """SQLite keeps the log beside the name: through a hard link a committed row is not even visible."""
    h1, h2 = write_home(tmp_path / "h1", slow_server), write_home(tmp_path / "h2", slow_server)
    _accept(h1)
    before = (h1 / "agents.db").read_bytes()
    os.link(h1 / "agents.db", h2 / "agents.db")
    for home in (h1, h2):
        refused = start_drain(home)
        _, stderr = refused.communicate(timeout=120)
        assert refused.returncode == 1
        assert "2 names (hard links)" in stderr and "Traceback" not in stderr
    assert (h1 / "agents.db").read_bytes() == before


def test_a_database_file_bind_mounted_on_its_own_is_refused_before_anything_runs(
    tmp_path: Path, slow_server: FakeProviderServer
) -> None:
    """A bind mount of the file alone is a second name with a log of its own: two drains corrupted the file."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("bind-mounting a file needs root and mount(8)")
    h1, h2 = write_home(tmp_path / "h1", slow_server), write_home(tmp_path / "h2", slow_server)
    _accept(h1)
    (h2 / "agents.db").touch()
    subprocess.run(["mount", "--bind", str(h1 / "agents.db"), str(h2 / "agents.db")], check=True)
    drains: list[subprocess.Popen[str]] = []
    try:
        drains.append(first := start_drain(h1))
        _wait_until_running(h1, first)
        drains.append(refused := start_drain(h2))
        _, stderr = refused.communicate(timeout=60)
        _, first_stderr = first.communicate(timeout=300)
    finally:
        for drain in drains:  # (without the refusal the second one runs on: it must not hold the mount)
            if drain.poll() is None:
                drain.kill()
                drain.wait()
        subprocess.run(["umount", str(h2 / "agents.db")], check=True)
    assert refused.returncode == 1, stderr
    assert "mounted on its own" in stderr and "mount its directory" in stderr and "Traceback" not in stderr
    assert first.returncode == 0, first_stderr
    assert _completed_per_message(h1) == Counter({f"msg-{n:03d}": 1 for n in range(MESSAGES)})


def test_when_the_lock_cannot_see_the_other_broker_the_claim_refuses_its_items(
    tmp_path: Path, slow_server: FakeProviderServer
) -> None:
    """The lock file removed while held (a cleaner, a user): the second drain takes a lock of its own and
    reloads the first one's running items as a crash leaves them; the claim refuses them."""
    home = write_home(tmp_path / "h1", slow_server)
    _accept(home)
    first = start_drain(home)
    _wait_until_running(home, first)
    (home / "broker.lock").unlink()
    second = start_drain(home)
    _, second_err = second.communicate(timeout=300)
    _, first_err = first.communicate(timeout=300)
    assert (first.returncode, second.returncode) == (0, 0), (first_err, second_err)
    assert "held by another running broker" in second_err + first_err
    assert _completed_per_message(home) == Counter({f"msg-{n:03d}": 1 for n in range(MESSAGES)})
