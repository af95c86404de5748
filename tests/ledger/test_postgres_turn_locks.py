"""Turn writes on PostgreSQL run READ COMMITTED behind row locks: the tree's invariants hold, and writes to
different sessions never refuse each other.

Real PostgreSQL (a fresh database per test), real processes racing (``pg_turn_worker.py``). Before the row
locks, turn writes ran SERIALIZABLE and processes writing different sessions refused each other's writes
(serialization failures on the turns' index pages, each run again: 172 per 500 turns with three brokers).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import psycopg

from nexus.ledger import AcceptRequest, HeadMovedError, Ledger, NewSession, TurnWrite
from nexus.testing.conformance.support import reply, user

WORKER = str(Path(__file__).with_name("pg_turn_worker.py"))
FENCED_MS = 2000
"""The lease's time to live from just before the fenced write starts: its fence (at the write's start) must find
it valid, so it is cut this short only then. 400 ms from its acquire ran out before the fence on a loaded machine:
the write was refused at once and never held the lease row."""
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _race(url: str, jobs: list[tuple[str, str]], count: int) -> list[tuple[int, int, int]]:
    """One worker per ``(mode, session)``, their writes started together; each one's (written, head moved,
    conflicts)."""
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, mode, url, session, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        )
        for mode, session in jobs
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        word, written, moved, conflicts = out.split()
        assert word == "done"
        results.append((int(written), int(moved), int(conflicts)))
    return results


def _chain(url: str, session: str) -> tuple[int, int, int]:
    """(turns on the session's path from its head, turns of the session in all, turns with two children)."""
    with psycopg.connect(url) as conn:
        path = conn.execute(
            "WITH RECURSIVE up(id, parent) AS (SELECT t.id, t.parent_turn_id FROM turns t JOIN sessions s"
            " ON s.thread_id = t.id WHERE s.label = %s UNION ALL SELECT t.id, t.parent_turn_id FROM turns t"
            " JOIN up ON t.id = up.parent) SELECT count(*) FROM up",
            (session,),
        ).fetchone()
        total = conn.execute("SELECT count(*) FROM turns WHERE session_label = %s", (session,)).fetchone()
        forks = conn.execute(
            "SELECT count(*) FROM (SELECT parent_turn_id FROM turns WHERE session_label = %s"
            " GROUP BY parent_turn_id HAVING count(*) > 1) f",
            (session,),
        ).fetchone()
    assert path is not None and total is not None and forks is not None
    return int(path[0]), int(total[0]), int(forks[0])


async def _sessions(url: str, *labels: str) -> None:
    async with await Ledger.connect(url) as ledger:
        for label in labels:
            await ledger.sessions.create(NewSession(label))


def test_processes_writing_different_sessions_never_refuse_each_other(postgres_url: str) -> None:
    labels = [f"s{n}" for n in range(3)]
    asyncio.run(_sessions(postgres_url, *labels))
    results = _race(postgres_url, [("writer", label) for label in labels], 150)
    assert [written for written, _, _ in results] == [150, 150, 150]
    assert [conflicts for _, _, conflicts in results] == [0, 0, 0]  # no write refused, none run again
    for label in labels:
        assert _chain(postgres_url, label) == (150, 150, 0)


def test_processes_racing_on_one_session_keep_it_one_chain(postgres_url: str) -> None:
    asyncio.run(_sessions(postgres_url, "s"))
    results = _race(postgres_url, [("racer", "s"), ("racer", "s")], 100)
    assert [written for written, _, _ in results] == [100, 100]
    # a loser is told the head moved (the clear error) and writes on the new head; never a refused write
    assert [conflicts for _, _, conflicts in results] == [0, 0]
    assert _chain(postgres_url, "s") == (200, 200, 0)  # one straight line: every turn on the head it read


async def test_writes_racing_on_one_parent_one_moves_the_head_the_others_are_told(postgres_url: str) -> None:
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.create(NewSession("s"))
        base = await ledger.turns.write(
            TurnWrite("s", None, query_messages=[user("q")], response_messages=[reply("a")])
        )

        async def write(n: int) -> str:
            try:
                return await ledger.turns.write(
                    TurnWrite(
                        "s", None, query_messages=[user(f"t{n}")], response_messages=[reply("x")], parent_turn_id=base
                    )
                )
            except HeadMovedError:
                return "head moved"

        outcomes = await asyncio.gather(*(write(n) for n in range(8)))  # one at a time: the process's write lane
        won = [turn for turn in outcomes if turn != "head moved"]
        assert len(won) == 1 and outcomes.count("head moved") == 7
        head = await ledger.sessions.head("s")
        assert head is not None and head.id == won[0] and head.parent_turn_id == base
        assert ledger.database.conflicts == 0  # type: ignore[attr-defined]


async def test_branches_racing_on_one_parent_each_get_their_own_slot(postgres_url: str) -> None:
    """``if_head_moved="branch"``: every writer lands; the parent's row lock gives each fork its own segment."""
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.create(NewSession("s"))
        base = await ledger.turns.write(
            TurnWrite("s", None, query_messages=[user("q")], response_messages=[reply("a")])
        )
        writes = [
            TurnWrite(
                "s",
                None,
                query_messages=[user(f"t{n}")],
                response_messages=[reply("x")],
                parent_turn_id=base,
                if_head_moved="branch",
            )
            for n in range(8)
        ]
        turns = await asyncio.gather(*(ledger.turns.write(w) for w in writes))
        assert len(set(turns)) == 8
        children = await ledger.turns.children(base)
        assert sorted(child.id for child in children) == sorted(turns)
        head = await ledger.sessions.head("s")
        assert head is not None and head.id in turns  # the first to commit moved the head; the others are branches
        with psycopg.connect(postgres_url) as conn:
            slots = conn.execute(
                "SELECT count(DISTINCT (segment_id, seq)) FROM turns WHERE parent_turn_id = %s", (base,)
            ).fetchone()
        assert slots is not None and slots[0] == 8


async def _waiting_on_a_lock(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and int(row[0]) > 0


async def _expired(url: str, session_label: str) -> None:
    """Wait until the server's clock has passed the session's lease (read without a lock: the write holds one)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(600):
            row = conn.execute(
                "SELECT expires_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT FROM session_leases"
                " WHERE session_label = %s",
                (session_label,),
            ).fetchone()
            if row is not None and row[0]:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the lease never expired")


async def test_a_turn_write_in_flight_holds_off_a_takeover_of_its_session(postgres_url: str) -> None:
    """The fence checked is the fence at the commit: while a turn write under a lease is in flight (here held on
    the session's row), another broker's acquire finds the lease row locked and is refused, even once the lease
    expired; the write then lands, and only after it may the session be taken over (epoch + 1)."""
    async with await Ledger.connect(postgres_url) as ledger:
        await ledger.sessions.create(NewSession("s"))
        item, _ = await ledger.queue.accept(AcceptRequest("w", "s", "m1", "user", {"content": "hi"}, "followup"))
        lease = await ledger.leases.acquire("s", "broker-a", 60_000)  # held through the claim, however slow the machine
        assert lease is not None
        await ledger.queue.claim([item.id], lease=lease)
        write = TurnWrite(
            "s", None, query_messages=[user("hi")], response_messages=[reply("a")], consumed_queue_items=[item.id]
        )
        with psycopg.connect(postgres_url) as holder:  # another transaction on the session's row
            holder.execute("SELECT 1 FROM sessions WHERE label = 's' FOR UPDATE")
            await ledger.leases.renew(lease, FENCED_MS)  # valid at the write's fence, then let run out while it waits
            writing = asyncio.ensure_future(ledger.turns.write(write))
            for _ in range(600):  # up to 30 s
                if writing.done() or await _waiting_on_a_lock(postgres_url):
                    break
                await asyncio.sleep(0.05)
            assert not writing.done(), f"the write never waited on the session's row: {writing.exception()!r}"
            assert await _waiting_on_a_lock(postgres_url), "the write never waited on the session's row"
            await _expired(postgres_url, "s")
            async with await Ledger.connect(postgres_url) as other:  # another broker
                taking = other.leases.acquire("s", "broker-b", 5000)
                assert await asyncio.wait_for(taking, 30) is None  # the write holds the lease row
            holder.rollback()
        turn = await writing
        taken = await ledger.leases.acquire("s", "broker-b", 5000)
        assert taken is not None and taken.epoch == lease.epoch + 1
        head = await ledger.sessions.head("s")
        assert head is not None and head.id == turn
        assert [i.status for i in await ledger.queue.items()] == ["delivered"]
