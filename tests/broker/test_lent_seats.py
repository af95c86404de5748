"""Runs waiting on other agents lend their seat: ``max_concurrent`` caps runs doing work, never a wait.

A run blocked in ``send_message_to_agent(waitForReply=true)`` or ``spawn_agent`` kept its seat while the
message it waited on needed one of its own: with every seat held by a waiting asker nothing ran until the
askers' ``timeout_ms`` (10 minutes). These run the real engine on a scripted model that decides by what it
is asked; every wait is bounded (a broker that deadlocks fails the test in seconds, it does not hang it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings, SendAndWaitResult
from nexus.broker.spawner import BrokerSpawner
from nexus.config import load_config
from nexus.engine import AgentSpec, EngineLimits, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.llm import Context
from nexus.testing import ScriptedModel
from nexus.testing.steps import Step, from_context, last_user_text, text, tool_call

BOUND_S = 10.0
"""Every wait of these tests: far above what the runs take, far below the askers' 600 s timeout."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


class CountingModel:
    """A scripted model that answers by the context and counts its calls under way (the runs doing work)."""

    def __init__(self, decide: Callable[[Context], Step]) -> None:
        self.scripted = ScriptedModel([from_context(decide)] * 64, record=False)
        self.model = self.scripted.model
        self.active = 0
        self.most = 0
        self.asked: list[str] = []
        """The last line of the user text (or tool result) of each call, in the order the calls began."""
        self._held: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}

    def hold(self, line: str) -> tuple[asyncio.Event, asyncio.Event]:
        """A call asked ``line`` sets the first event as it begins, then waits for the second before answering."""
        held = self._held[line] = (asyncio.Event(), asyncio.Event())
        return held

    async def stream(self, model: Any, context: Context, options: Any = None) -> AsyncIterator[Any]:
        asked = last_line(context)
        self.asked.append(asked)
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            for _ in range(5):  # a few loop iterations: any other run allowed to work meanwhile overlaps this call
                await asyncio.sleep(0)
            if asked in self._held:
                began, release = self._held[asked]
                began.set()
                await release.wait()
            async for event in self.scripted.stream(model, context, options):
                yield event
        finally:
            self.active -= 1


def ask_pb(context: Context) -> Step:
    """``pa`` asks ``pb`` and waits; ``pb`` and ``pc`` answer; ``pa`` answers with ``pb``'s reply."""
    asked = last_user_text(context)
    if "ask pb" in asked:
        return tool_call("send_message_to_agent", {"to": "pb", "content": "question", "waitForReply": True})
    if "[Message from pa]" in asked:
        return text("pb answer")
    return text(f"done: {last_line(context)}")


def last_line(context: Context) -> str:
    """The last line of what the model is asked (a session's message comes after an ``[Event context]``)."""
    return last_user_text(context).rsplit("\n", 1)[-1]


async def start(ledger: Ledger, model: CountingModel, max_concurrent: int, agents: tuple[str, ...]) -> AgentBroker:
    runtime = Runtime(load_config(), ledger, stream_fn=model.stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(ledger, runtime, BrokerSettings(max_concurrent=max_concurrent,
                                                         queue=QueueSettings(mode="followup")))  # fmt: skip
    await broker.start()
    for agent in agents:
        await ledger.sessions.ensure(NewSession(f"agent:{agent}"))
        broker.register_agent(AgentIdentity(agent, f"agent:{agent}"), spec=AgentSpec(model=model.model.ref))
    return broker


async def ask(broker: AgentBroker, agent: str, content: str, session: str | None = None) -> SendAndWaitResult:
    message = AgentMessage(f"{agent}-{content}", "user", agent, content, session=session)
    return await asyncio.wait_for(broker.send_and_wait(message), BOUND_S)


async def test_two_askers_waiting_on_a_third_agent_with_two_seats_all_finish(ledger: Ledger) -> None:
    """The trial's repro: cap 2, ``pa`` asks ``pb`` from two sessions at once, and ``pc`` gets a message:
    the two asks held both seats, and ``pb`` and ``pc`` waited in line until the askers timed out."""
    model = CountingModel(ask_pb)
    broker = await start(ledger, model, 2, ("pa", "pb", "pc"))
    first, second, third = await asyncio.gather(
        ask(broker, "pa", "ask pb s1", "dm:s1"), ask(broker, "pa", "ask pb s2", "dm:s2"), ask(broker, "pc", "hello")
    )
    assert (first.reply, second.reply, third.reply) == ("done: pb answer", "done: pb answer", "done: hello")
    assert model.most == 2  # both seats did work, and never more than two runs at once
    await broker.close()


async def test_one_seat_an_asker_and_the_agent_it_waits_on_both_run(ledger: Ledger) -> None:
    """Cap 1: ``nexus send pa "ask pb" --wait`` hung, the only seat held by ``pa`` waiting on ``pb``."""
    model = CountingModel(ask_pb)
    broker = await start(ledger, model, 1, ("pa", "pb"))
    result = await ask(broker, "pa", "ask pb")
    assert result.success and result.reply == "done: pb answer"
    assert model.most == 1
    await broker.close()


async def test_an_asker_whose_reply_came_goes_on_before_a_batch_queued_meanwhile(ledger: Ledger) -> None:
    """Cap 1: a message for ``pc`` is queued while ``pb`` answers ``pa``. ``pa`` takes the seat back first (a
    waiting asker is not starved by new batches), then ``pc`` runs."""
    model = CountingModel(ask_pb)
    began, release = model.hold("question")
    broker = await start(ledger, model, 1, ("pa", "pb", "pc"))
    asking = asyncio.get_running_loop().create_task(ask(broker, "pa", "ask pb"))
    await asyncio.wait_for(began.wait(), BOUND_S)  # pb's turn is under way
    receipt = await broker.send(AgentMessage("pc-1", "user", "pc", "hello"))  # in line, behind pb's seat
    release.set()
    assert (await asyncio.wait_for(asking, BOUND_S)).reply == "done: pb answer"
    assert (await asyncio.wait_for(receipt.outcome(), BOUND_S)).reply == "done: hello"
    assert model.asked == ["ask pb", "question", "pb answer", "hello"]
    await broker.close()


async def test_a_sub_agent_chain_deeper_than_the_cap_finishes(ledger: Ledger) -> None:
    """Cap 2, ``subagent_max_depth`` 4: each agent spawns a worker and waits on it. The chain stopped at
    the cap's depth (the spawners held every seat; the next worker never started)."""

    def deeper(context: Context) -> Step:
        asked = last_user_text(context)
        if "spawn_agent" in {tool.name for tool in context.tools or ()} and not asked.startswith("from below"):
            return tool_call("spawn_agent", {"task": "go deeper", "label": "deep"})
        return text(f"from below: {last_line(context)}")

    model = CountingModel(deeper)
    runtime = Runtime(load_config(), ledger, stream_fn=model.stream, cooldowns=ProfileCooldowns(),
                      limits=EngineLimits(subagent_max_depth=4))  # fmt: skip
    broker = AgentBroker(ledger, runtime, BrokerSettings(max_concurrent=2, queue=QueueSettings(mode="followup")))
    runtime.spawner = BrokerSpawner(broker)
    await broker.start()
    await ledger.sessions.ensure(NewSession("agent:lead"))
    broker.register_agent(AgentIdentity("lead", "agent:lead", "manager"), spec=AgentSpec(model=model.model.ref))
    result = await ask(broker, "lead", "go deep")
    assert result.success
    workers = [a for a in broker.list_agents() if a.identity.agent_id.startswith("worker-")]
    assert len(workers) == 4  # depths 1 to 4; the last answered without spawning
    assert result.reply == "from below: " * 5 + "go deeper"
    assert model.most == 1  # a chain: one run works at a time, the others wait on it
    await broker.close()


async def test_the_cap_still_bounds_runs_doing_work_while_askers_wait(ledger: Ledger) -> None:
    """Cap 2, four askers waiting on ``pb`` and six other agents' messages: everything finishes, and the
    model never has more than two calls under way (lent seats are not extra seats)."""
    model = CountingModel(ask_pb)
    others = tuple(f"q{n}" for n in range(6))
    broker = await start(ledger, model, 2, ("pa", "pb", *others))
    asks = [ask(broker, "pa", f"ask pb s{n}", f"dm:s{n}") for n in range(4)]
    results = await asyncio.gather(*asks, *(ask(broker, agent, f"work {agent}") for agent in others))
    assert [r.reply for r in results[:4]] == ["done: pb answer"] * 4
    assert [r.reply for r in results[4:]] == [f"done: work {agent}" for agent in others]
    assert model.most == 2
    await broker.close()


async def test_an_asker_aborted_while_it_waits_leaves_the_seats_counted_right(ledger: Ledger) -> None:
    """Cap 1: ``pa`` is aborted while ``pb`` answers it. Its seat comes back to it at once (its run writes its
    turn), and afterwards the cap still holds: four more messages run one at a time and all finish."""
    model = CountingModel(ask_pb)
    began, release = model.hold("question")
    broker = await start(ledger, model, 1, ("pa", "pb", "pc"))
    asking = asyncio.get_running_loop().create_task(ask(broker, "pa", "ask pb"))
    await asyncio.wait_for(began.wait(), BOUND_S)
    assert broker.abort("pa")
    assert (await asyncio.wait_for(asking, BOUND_S)).success is False
    release.set()
    await asyncio.wait_for(broker.wait_until_idle(), BOUND_S)
    model.most = 0
    sends = [("pa", "after 1"), ("pb", "after 2"), ("pc", "after 3"), ("pa", "after 4")]
    results = await asyncio.gather(*(ask(broker, agent, content) for agent, content in sends))
    assert [r.reply for r in results] == [f"done: after {n}" for n in range(1, 5)]
    assert model.most == 1
    await broker.close()
