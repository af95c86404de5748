"""A claim takes a ``processing`` item only from a broker that is gone (``nexus.ledger._claims``).

The holders are real processes: one still running, one that exited (its pid reaped).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.errors import QueueItemsFinishedError, QueueItemsHeldError


@pytest.fixture
def store(tmp_path: Path) -> Iterator[BrokerStore]:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        store.save_agent("a", role="worker", session_label="agent:a", spec={})
        for n in range(3):
            store.accept(agent_id="a", session_label="agent:a", message_id=f"m{n}", sender="user",
                         message={"content": f"m{n}"}, mode="followup")  # fmt: skip
        yield store


@pytest.fixture
def live_pid() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _held_by(store: BrokerStore, holder: str, attempts: int = 1) -> list[str]:
    ids = [item.id for item in store.pending()]
    store.database.write(
        lambda c: c.execute(
            "UPDATE queue_items SET status = 'processing', attempts = ?, claimed_by = ?", (attempts, holder)
        )
    )
    return ids


def test_an_item_a_live_broker_runs_is_refused_and_stays_its(store: BrokerStore, live_pid: int) -> None:
    holder = f"{socket.gethostname()}:{live_pid}"
    ids = _held_by(store, holder)
    with pytest.raises(QueueItemsHeldError) as refused:
        store.claim(ids[:2])
    assert refused.value.held == {ids[0]: holder, ids[1]: holder}
    assert set(refused.value.finished) == set(ids[:2])  # the batch drops them like items finished elsewhere
    assert isinstance(refused.value, QueueItemsFinishedError)
    assert [(item.attempts, item.status) for item in store.pending()] == [(1, "processing")] * 3


def test_an_item_of_a_broker_that_died_is_taken_over(store: BrokerStore) -> None:
    ids = _held_by(store, f"{socket.gethostname()}:{_dead_pid()}")
    store.claim(ids)
    assert [item.attempts for item in store.pending()] == [2, 2, 2]  # the cut run counts as an attempt
    store.claim(ids)  # held by this process now: claimable again (a steer, then its batch)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc")
def test_a_dead_brokers_pid_reused_by_a_later_process_does_not_hold_its_items(
    store: BrokerStore, live_pid: int
) -> None:
    """The stamp carries the holder's start time: the same pid started at another time is someone else."""
    from nexus.ledger._claims import claimant

    host = socket.gethostname()
    ids = _held_by(store, f"{host}:{live_pid} 1")  # the pid runs, but it is not the process that claimed
    store.claim(ids)
    me = claimant()
    assert me.startswith(f"{host}:{os.getpid()} ") and me.split(" ")[1].isdigit()
    assert {item.attempts for item in store.pending()} == {2}
    started = Path(f"/proc/{live_pid}/stat").read_text().rpartition(")")[2].split()[19]
    ids = _held_by(store, f"{host}:{live_pid} {started}")  # that very process: alive, held
    with pytest.raises(QueueItemsHeldError, match=f"running broker \\({host}:{live_pid}\\)"):
        store.claim(ids[:1])


def test_another_hosts_broker_counts_as_alive(store: BrokerStore) -> None:
    ids = _held_by(store, "some-other-host:1")
    with pytest.raises(QueueItemsHeldError, match="some-other-host:1"):
        store.claim(ids[:1])


def test_a_row_older_than_the_stamp_is_claimable(store: BrokerStore) -> None:
    from nexus.ledger._claims import claimant

    ids = _held_by(store, None)  # type: ignore[arg-type]  # a processing row from before schema 12
    store.claim(ids)  # not refused as held: no broker named
    rows = store.database.read(lambda c: c.execute("SELECT claimed_by, attempts FROM queue_items").fetchall())
    assert rows == [(claimant(), 2)] * len(ids), "taken in this process's name, the attempt counted"


def test_a_start_fails_the_exhausted_items_of_dead_brokers_only(store: BrokerStore, live_pid: int) -> None:
    ids = _held_by(store, f"{socket.gethostname()}:{live_pid}", attempts=3)
    store.database.write(
        lambda c: c.execute(
            "UPDATE queue_items SET claimed_by = ? WHERE id = ?", (f"{socket.gethostname()}:{_dead_pid()}", ids[0])
        )
    )
    failed = store.fail_exhausted(3)
    assert [item.id for item in failed] == [ids[0]]
    assert [item.id for item in store.pending()] == ids[1:]


def test_a_forked_child_claims_in_its_own_name() -> None:
    """The name is made once a process, not once for all: a child forked after its parent claimed is another."""
    from nexus.ledger._claims import claimant

    parent = claimant()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its name to the parent, then gone without running the parent's clean-ups
        os.write(write, claimant().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 256).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert claimant() == parent
    assert child.startswith(f"{socket.gethostname()}:{pid} ") and child != parent
