"""Group commit of the crash journal's snapshots: the snapshots of many runs in one transaction.

Each streaming run journals a snapshot of its reply every ``PARTIAL_INTERVAL_S`` (0.25 s): with
1,000 runs that is 4,000 snapshots a second. Handing each one to the writer thread on its own
cost the event loop an executor future, a thread-safe wake-up and a transaction per snapshot;
here a snapshot is appended to one list, one writer job drains whatever has accumulated and
writes it in ONE transaction per ledger (``ledger.turns.journal``), and each event loop is
told once per batch. A batch that fails (a turn closed meanwhile, a full disk) is retried one
snapshot at a time, so each run reports only its own failure.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Protocol

from nexus.engine.execution._writer import writer
from nexus.ledger import JournalReply

if TYPE_CHECKING:
    from nexus.ledger import Ledger
    from nexus.llm import AssistantMessage


class TurnJournal(Protocol):
    """What the batcher needs of a run's journal (``_journal.TurnJournal``; named here so the two
    modules do not import each other)."""

    ledger: Ledger
    loop: asyncio.AbstractEventLoop
    lock: threading.Lock
    closed: bool
    ended: int
    turn_id: str
    written: tuple[int, ...]

    def write_one(self, slot: int, message: AssistantMessage) -> None: ...

    def wrote(self, seconds: float) -> None: ...

    def snapshot_written(self) -> None: ...


Item = tuple[TurnJournal, int, "AssistantMessage"]


class SnapshotQueue:
    """Snapshots waiting for the writer thread (see the module docstring); one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[Item] = []

    def add(self, journal: TurnJournal, slot: int, message: AssistantMessage) -> None:
        """Loop: queue one snapshot; the journal's ``snapshot_written`` runs on its loop once it is written."""
        with self._lock:
            self._items.append((journal, slot, message))
            drain_queued = len(self._items) > 1
        if not drain_queued:
            writer().submit(self._drain)

    def _drain(self) -> None:
        """Writer thread: write everything queued so far, one transaction per ledger, then tell the loops."""
        with self._lock:
            items, self._items = self._items, []
        groups: dict[Ledger, list[Item]] = {}
        for item in items:
            groups.setdefault(item[0].ledger, []).append(item)
        for ledger, group in groups.items():
            _write_group(ledger, group)
        loops: dict[asyncio.AbstractEventLoop, list[TurnJournal]] = {}
        for journal, _, _ in items:
            loops.setdefault(journal.loop, []).append(journal)
        for loop, journals in loops.items():
            try:
                loop.call_soon_threadsafe(_written, journals)
            except RuntimeError:  # the loop closed meanwhile: nobody waits for these any more
                pass


def _write_group(ledger: Ledger, group: list[Item]) -> None:
    """Write the live snapshots of one ledger in one transaction (one by one if that fails)."""
    held: list[TurnJournal] = []
    try:
        live: list[Item] = []
        for journal, slot, message in group:
            journal.lock.acquire()  # no final write or close of this run interleaves (see TurnJournal)
            held.append(journal)
            if not journal.closed and slot > journal.ended:
                live.append((journal, slot, message))
        if not live:
            return
        began = time.perf_counter()
        try:
            entries = [JournalReply(j.turn_id, slot, message) for j, slot, message in live]
            ledger.run_here(lambda here: here.turns.journal(entries))
        except Exception:
            for journal, slot, message in live:
                journal.write_one(slot, message)
        else:
            for journal, slot, _ in live:
                journal.written += (slot,)
        _share_cost(live, time.perf_counter() - began)
    finally:
        for journal in held:
            journal.lock.release()


def _share_cost(live: list[Item], elapsed: float) -> None:
    """Each run's share of the batch's time, by its reply's size, sets the gap before its next snapshot."""
    sizes = [_chars(message) for _, _, message in live]
    total = sum(sizes) or 1
    for (journal, _, _), size in zip(live, sizes, strict=True):
        journal.wrote(elapsed * size / total)


def _chars(message: AssistantMessage) -> int:
    """Characters of text and thinking in a snapshot (what its write costs grows with)."""
    return sum(len(getattr(b, "text", "") or getattr(b, "thinking", "") or "") for b in message.content) + 1


WRITTEN_PER_ROUND = 32
"""At most this many runs hear that their snapshot is written per round of the event loop (see :func:`_written`)."""


def _written(journals: list[TurnJournal], start: int = 0) -> None:
    """Loop: the snapshots of ``journals`` are written; text that arrived meanwhile gets its turn.

    A batch holds the snapshots of every run that took one while the last was written, hundreds
    with 1,000 runs; each run then plans its next snapshot (was a timer, ~14 us). Told all in one
    callback, that was one iteration of the loop of ~3 ms per batch (bench_engine_concurrent.py
    ``--slow-iterations``), which every timer and socket waited for; told :data:`WRITTEN_PER_ROUND`
    at a time, the rest a round later, the loop serves the others in between.
    """
    end = start + WRITTEN_PER_ROUND
    for journal in journals[start:end]:
        journal.snapshot_written()
    if end < len(journals):
        asyncio.get_running_loop().call_soon(_written, journals, end)


SNAPSHOTS = SnapshotQueue()
"""The process's snapshot queue (drained by the one writer thread)."""
