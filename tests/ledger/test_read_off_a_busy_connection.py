"""A read of the async stores never stalls the event loop behind another thread's use of the connection.

The SQLite ledger has one connection, shared by the event loop (inline reads and writes), the engine's
ledger writer thread and the WAL checkpointer, behind one lock. A read that waited for that lock on the
loop stopped every other coroutine meanwhile: with 500-1,000 runs started at once, each run's start reads
(its session's open turns, the session row) queued behind the writer thread's turn writes and the loop
stalled for tens of milliseconds at a time. Here another thread holds the connection for a while; the
loop must keep running (a ticker ticks) and the read must still return what is stored once it is free.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from nexus.ledger import Ledger, NewSession

HOLD_S = 0.4


async def test_a_read_waits_for_a_busy_connection_off_the_event_loop(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        await ledger.sessions.ensure(NewSession("s"))
        lock = ledger.database._lock  # what the writer thread and the checkpointer take
        held, release = threading.Event(), threading.Event()

        def writer_thread() -> None:
            with lock:
                held.set()
                release.wait(10)

        thread = threading.Thread(target=writer_thread)
        thread.start()
        held.wait(5)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticking = asyncio.create_task(ticker())
        read = asyncio.create_task(ledger.sessions.get("s"))
        await asyncio.sleep(HOLD_S)
        assert not read.done()  # it waits for the connection...
        assert ticks >= 3, ticks  # ...and the loop kept running meanwhile
        release.set()
        session = await asyncio.wait_for(read, 10)
        assert session.label == "s"
        ticking.cancel()
        thread.join(5)


async def test_a_read_of_a_free_connection_runs_inline(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        await ledger.sessions.ensure(NewSession("s"))
        before = threading.active_count()
        assert (await ledger.sessions.get("s")).label == "s"
        assert threading.active_count() == before  # no worker thread started for it
