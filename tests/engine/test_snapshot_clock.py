"""Many runs' planned journal snapshots share the loop's timers, and a withdrawn plan never fires.

With 1,000 runs streaming, one loop timer per run and snapshot kept ~1,000 more timers in the
loop's heap (Python comparisons on every push and pop, paid by every other timer of the loop).
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import until

from nexus.engine.execution._journal import TurnJournal
from nexus.ledger import Ledger, NewSession, TurnDetails, TurnOpen
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, UserMessage


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[Ledger, list[str]]]:
    with Ledger.open(tmp_path / "agents.db") as led:
        turns = []
        for i in range(200):
            run_inline(led.sessions.create(NewSession(f"s{i}")))
            open_ = TurnOpen(f"s{i}", [UserMessage("q")], TurnDetails(model="m", provider="p"))
            turns.append(run_inline(led.turns.open(open_)))
        yield led, turns


def _streaming(journal: TurnJournal, text: str) -> AssistantMessage:
    """A reply that started streaming and has ``text`` so far (its snapshot is planned, not yet due)."""
    live = AssistantMessage([TextContent(text)], api="a", provider="p", model="m")
    journal.start(live)
    journal.grew(len(text))
    return live


async def test_the_planned_snapshots_of_many_runs_share_a_few_loop_timers(
    opened: tuple[Ledger, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, turns = opened
    loop = asyncio.get_running_loop()
    journals = [TurnJournal(ledger, turn, interval_s=0.1, chunk_chars=10**9) for turn in turns]
    timers: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        timers.append(when)
        return call_at(when, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting_call_at)  # call_later goes through it too
    began = time.monotonic()
    for journal in journals:
        _streaming(journal, "partial answer")
    planned_for = time.monotonic() - began
    monkeypatch.undo()
    # a timer per 10 ms the plans span (they are made over `planned_for`), not one per run
    assert len(timers) <= planned_for / 0.01 + 2 < len(journals), (len(timers), planned_for)
    await until(lambda: all(0 in j.written for j in journals), "every run's snapshot")
    for journal in journals:
        journal.stop()


async def test_a_withdrawn_snapshot_plan_does_not_fire(opened: tuple[Ledger, list[str]]) -> None:
    ledger, turns = opened
    ended, streaming = (TurnJournal(ledger, turn, interval_s=0.05, chunk_chars=10**9) for turn in turns[:2])
    first = _streaming(ended, "short answer")
    _streaming(streaming, "a longer answer")  # planned for the same tick
    ended.end(first)  # ended before its snapshot was due: held back, the plan withdrawn
    await until(lambda: 0 in streaming.written, "the other run's snapshot")
    await asyncio.sleep(0.1)
    assert ended.written == () and ended.held == (0, first)
    streaming.stop()


def test_a_loop_closed_with_a_planned_snapshot_keeps_no_run_alive(opened: tuple[Ledger, list[str]]) -> None:
    ledger, turns = opened

    async def plan() -> weakref.ref[TurnJournal]:
        journal = TurnJournal(ledger, turns[0], interval_s=60.0, chunk_chars=10**9)
        _streaming(journal, "partial answer")
        return weakref.ref(journal)

    loop = asyncio.new_event_loop()
    journal = loop.run_until_complete(plan())
    loop.close()
    gc.collect()
    assert journal() is None
