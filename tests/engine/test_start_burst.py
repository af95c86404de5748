"""A burst of ``runtime.start`` calls: the runs' starting steps (the session's lock, the reads, the assembly, the
turn's open) go on a few per round of the event loop, so the loop serves everything else in between.

Before, every started run's first step was ready in the same round of the loop and ran there back to back: 1,000
runs started together kept a timer or a socket waiting for over a second. Counted here, not timed: a callback
scheduled right after the burst runs once a few runs have started, not after all of them. What the runs do is
unchanged (their results, one session's runs in the order they were started, an abort or a cancel before
the start)."""

from __future__ import annotations

import asyncio

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.wiring._start import STARTS_PER_ROUND
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

BURST = 6 * STARTS_PER_ROUND


def _runtime(ledger: Ledger, replies: int) -> tuple[Runtime, AgentSpec]:
    scripted = ScriptedModel([text("reply") for _ in range(replies)])
    runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    return runtime, AgentSpec(model=scripted.model.ref)


async def test_a_callback_scheduled_after_a_burst_of_starts_runs_before_all_their_starting_steps(
    ledger: Ledger,
) -> None:
    runtime, spec = _runtime(ledger, BURST)
    executions = [runtime.start(spec, f"s{n}", "hello") for n in range(BURST)]
    started_when_it_ran: list[int] = []
    asyncio.get_running_loop().call_soon(lambda: started_when_it_ran.append(sum(e.started for e in executions)))
    results = await asyncio.gather(*(e.result for e in executions))
    assert started_when_it_ran[0] <= 2 * STARTS_PER_ROUND < BURST  # before: all BURST had started
    assert [r.stop_reason for r in results] == ["end_turn"] * BURST
    for n in range(BURST):
        assert [m.role for m in await ledger.turns.history(f"s{n}")] == ["user", "assistant"]


async def test_runs_of_one_session_started_in_a_burst_run_in_the_order_they_were_started(ledger: Ledger) -> None:
    runtime, spec = _runtime(ledger, BURST + 3)
    others = [runtime.start(spec, f"s{n}", "hello") for n in range(BURST)]  # the session's runs wait at the gate
    mine = [runtime.start(spec, "mine", word) for word in ("one", "two", "three")]
    await asyncio.gather(*(e.result for e in [*others, *mine]))
    history = await ledger.turns.history("mine")
    typed = [m.content.rpartition("\n")[2] for m in history if m.role == "user" and isinstance(m.content, str)]
    assert typed == ["one", "two", "three"]


async def test_a_run_aborted_right_after_a_burst_of_starts_ends_as_one_aborted_right_after_its_start(
    ledger: Ledger,
) -> None:
    runtime, spec = _runtime(ledger, 2 * BURST)
    alone = runtime.start(spec, "alone", "hello")
    alone.abort("changed my mind")
    alone_result = await alone.result
    executions = [runtime.start(spec, f"s{n}", "hello") for n in range(BURST)]
    executions[-1].abort("changed my mind")  # waits at the gate: it has not taken its session's lock
    results = await asyncio.gather(*(e.result for e in executions))
    last = results[-1]
    assert (last.stop_reason, last.error) == (alone_result.stop_reason, alone_result.error)
    assert [m.role for m in last.messages] == [m.role for m in alone_result.messages]
    assert (last.turn_id is None) == (alone_result.turn_id is None)
    assert [r.stop_reason for r in results[:-1]] == ["end_turn"] * (BURST - 1)


async def test_a_run_cancelled_while_it_waits_its_turn_to_start_writes_nothing_and_the_others_end(
    ledger: Ledger,
) -> None:
    runtime, spec = _runtime(ledger, BURST)
    executions = [runtime.start(spec, f"s{n}", "hello") for n in range(BURST)]
    await asyncio.sleep(0)  # one round: the first few runs started, the last waits its turn
    assert not executions[-1].started
    executions[-1].result.cancel()
    done = await asyncio.gather(*(e.result for e in executions), return_exceptions=True)
    assert isinstance(done[-1], asyncio.CancelledError) and executions[-1].state == "done"
    assert await ledger.turns.history(f"s{BURST - 1}") == []
    assert [r.stop_reason for r in done[:-1] if not isinstance(r, BaseException)] == ["end_turn"] * (BURST - 1)
    assert runtime.live() == []
