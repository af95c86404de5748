"""The broker on the real engine with the scripted model: turns, delivery with the turn, delegation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.adapters.types import DeliveryTarget
from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.broker.spawner import BrokerSpawner
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.llm.abort import AbortSignal
from nexus.streaming import stream_events
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        yield opened


async def start_broker(
    ledger: Ledger, scripted: ScriptedModel, *, stream_fn: Any = None, runtime: Runtime | None = None
) -> AgentBroker:
    stream = stream_fn or scripted.stream
    env = runtime or Runtime(load_config(), ledger, stream_fn=stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(ledger, env, BrokerSettings(queue=QueueSettings(mode="followup")))
    env.spawner = BrokerSpawner(broker)
    await broker.start()
    for agent_id, role in (("lead", "manager"), ("coder", "worker")):
        await ledger.sessions.ensure(NewSession(f"agent:{agent_id}"))
        broker.register_agent(
            AgentIdentity(agent_id, f"agent:{agent_id}", role),  # type: ignore[arg-type]
            spec=AgentSpec(model=scripted.model.ref),
        )
    return broker


async def test_a_message_becomes_a_turn_that_consumes_its_queue_item(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("Hello from coder.")])
    broker = await start_broker(ledger, scripted)
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "coder", "say hello"), timeout_ms=20_000)
    assert result.success and result.reply == "Hello from coder."
    head = await ledger.sessions.head("agent:coder")
    assert head is not None and head.id == result.turn_id and head.status == "completed"
    (item,) = BrokerStore(ledger.database).items(agent_id="coder")
    assert (item.status, item.turn_id, item.attempts) == ("delivered", head.id, 1)
    await broker.close()


async def test_a_manager_delegates_and_waits_for_the_workers_reply(ledger: Ledger) -> None:
    scripted = ScriptedModel(
        [
            tool_call("send_message_to_agent", {"to": "coder", "content": "What is 2+2?", "waitForReply": True}),
            text("4"),  # the worker's turn, while the manager's tool call waits
            text("The coder says the answer is 4."),
        ]
    )
    broker = await start_broker(ledger, scripted)
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "lead", "ask the coder"), timeout_ms=20_000)
    assert result.success and result.reply == "The coder says the answer is 4."
    worker_turns = await ledger.turns.path("agent:coder")
    assert len(worker_turns) == 1 and worker_turns[0].status == "completed"
    worker_query = (await ledger.turns.messages(worker_turns[0].id))[0].message
    assert "[Message from lead]" in str(worker_query.content) and "What is 2+2?" in str(worker_query.content)
    logged = ledger.database.connection.execute("SELECT from_agent, to_agent, content FROM broker_messages")
    assert logged.fetchall() == [("lead", "coder", "What is 2+2?")]
    assert "send_message_to_agent" in {t.name for t in scripted.calls[0].tools}
    await broker.close()


async def test_a_run_that_cannot_start_fails_its_items_with_the_reason(ledger: Ledger) -> None:
    scripted = ScriptedModel([])
    broker = await start_broker(ledger, scripted)
    broker.register_agent(AgentIdentity("ghost", "agent:ghost"), spec=AgentSpec(model="local/no-such-model"))
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "ghost", "hi"), timeout_ms=20_000)
    assert not result.success and "unknown local model" in (result.error or "")
    (item,) = BrokerStore(ledger.database).items(agent_id="ghost")
    assert item.status == "failed" and "unknown local model" in (item.error or "")
    await broker.close()


async def test_the_agents_tool_list_narrows_what_it_is_offered(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("done")])
    broker = await start_broker(ledger, scripted)
    spec = AgentSpec(model=scripted.model.ref, tools=("read", "ls"))
    broker.register_agent(AgentIdentity("reader", "agent:reader"), spec=spec)
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "reader", "look around"), timeout_ms=20_000)
    assert result.success
    assert {t.name for t in scripted.calls[0].tools} == {"read", "ls"}
    await broker.close()


async def _until_the_model_is_called(scripted: ScriptedModel) -> None:
    """Wait (up to 4 s) until the first turn reached the model, so a steer has a running turn to enter."""
    for _ in range(400):
        if scripted.calls:
            return
        await asyncio.sleep(0.01)


async def test_a_steer_enters_the_running_turn_and_is_delivered_with_it(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("bash", {"command": "sleep 1"}), text("done, with tabs")])
    broker = await start_broker(ledger, scripted)
    first = await broker.send(AgentMessage("m-1", "user", "coder", "format the file"), "followup")
    await _until_the_model_is_called(scripted)
    steered = await broker.send(AgentMessage("m-2", "user", "coder", "use tabs"), "steer")
    assert steered.steered
    assert await broker.wait_for_idle("coder", timeout_ms=20_000)
    (turn,) = await ledger.turns.path("agent:coder")  # one turn consumed both messages
    second_call = scripted.calls[1].messages
    assert any("use tabs" in str(m.content) for m in second_call if m.role == "user")
    items = {item.id: item for item in BrokerStore(ledger.database).items(agent_id="coder")}
    assert items[first.queue_item_id].turn_id == items[steered.queue_item_id].turn_id == turn.id
    assert {item.status for item in items.values()} == {"delivered"}
    await broker.close()


async def test_a_steer_during_the_final_reply_is_answered_in_the_same_turn(ledger: Ledger) -> None:
    """docs/broker.md said a steer arriving while the last reply streams is returned and becomes the next
    turn; the run reads it at the safe point after that reply and calls the model again (pi does the same).
    That is what a steer asks for - the running agent reads it now - so the docs now say so."""
    scripted = ScriptedModel([text("Here is the summary of the whole file."), text("Now in French: voici.")])
    streaming, resume = asyncio.Event(), asyncio.Event()

    async def paused_final_reply(model: Any, context: Any, options: Any = None) -> Any:
        paused = not streaming.is_set()
        async for event in scripted.stream(model, context, options):
            yield event
            if paused and event.type == "text_delta" and not streaming.is_set():
                streaming.set()  # the first reply is streaming its text: no tool call comes, it is the last one
                await resume.wait()

    broker = await start_broker(ledger, scripted, stream_fn=paused_final_reply)
    first = await broker.send(AgentMessage("m-1", "user", "coder", "summarise the file"), "followup")
    run = await first.follow()
    assert run is not None
    await asyncio.wait_for(streaming.wait(), 10)
    steered = await broker.send(AgentMessage("m-2", "user", "coder", "and in French"), "steer")
    resume.set()
    assert steered.steered
    target = DeliveryTarget("broker", "local", "agent:coder")
    events = [event async for event in stream_events(run[0], target, run[1])]
    assert await broker.wait_for_idle("coder", timeout_ms=20_000)
    shown = [e.type if e.type != "stream_end" else f"end final={e.final}" for e in events if e.type != "token"]
    assert shown == ["stream_start", "end final=False", "end final=True"]  # the answer is not glued to the reply
    cut = next(n for n, e in enumerate(events) if e.type == "stream_end")
    assert "".join(e.text for e in events[:cut] if e.type == "token") == "Here is the summary of the whole file."
    assert "".join(e.text for e in events[cut:] if e.type == "token") == "Now in French: voici."
    (turn,) = await ledger.turns.path("agent:coder")  # one turn: the reply, the steer, the answer to it
    assert turn.status == "completed" and len(scripted.calls) == 2
    assert str(scripted.calls[1].messages[-1].content).endswith("and in French")
    roles = [(m.role, m.text.rsplit("\n", 1)[-1]) for m in await ledger.turns.messages(turn.id)]
    assert roles == [
        ("user", "summarise the file"),
        ("assistant", "Here is the summary of the whole file."),
        ("user", "and in French"),
        ("assistant", "Now in French: voici."),
    ]
    items = BrokerStore(ledger.database).items(agent_id="coder")
    assert [(i.id, i.status, i.turn_id) for i in items] == [
        (first.queue_item_id, "delivered", turn.id),
        (steered.queue_item_id, "delivered", turn.id),
    ]
    await broker.close()


async def test_a_steer_sent_after_abort_is_returned_and_runs_next_in_its_place(ledger: Ledger) -> None:
    """The run was aborted but has not ended (its tool is still finishing): a steer sent now is handed
    back, listed in the run's ``returned_steers``, and its item runs next — before a later followup."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        started.set()
        await release.wait()  # ignores the abort: the run stays active while the steer arrives
        return AgentToolResult.text("slow done")

    scripted = ScriptedModel([tool_call("slow", {}), text("ran 2"), text("ran 3")])  # aborted: no call after the tool
    tool = AgentTool("slow", "a slow tool", {"type": "object", "properties": {}}, slow)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns(), tools=[tool])
    broker = await start_broker(ledger, scripted, runtime=env)
    first = await broker.send(AgentMessage("m-1", "user", "coder", "go"), "followup")
    run = await first.execution()
    assert run is not None
    await asyncio.wait_for(started.wait(), 10)
    assert broker.abort("coder")
    steered = await broker.send(AgentMessage("m-2", "user", "coder", "task 2"), "steer")
    later = await broker.send(AgentMessage("m-3", "user", "coder", "task 3"), "followup")
    assert steered.steered  # handed to the aborted run, which hands it back
    release.set()
    assert await broker.wait_for_idle("coder", timeout_ms=20_000)
    assert [r.id for r in (await run.result).returned_steers] == [steered.queue_item_id]
    turns = await ledger.turns.path("agent:coder")
    assert [t.status for t in turns] == ["aborted", "completed", "completed"]
    texts = [[m.text.rsplit("\n", 1)[-1] for m in await ledger.turns.messages(t.id)] for t in turns]
    assert [t[0] for t in texts] == ["go", "task 2", "task 3"] and texts[1][-1] == "ran 2"
    items = {item.id: item for item in BrokerStore(ledger.database).items(agent_id="coder")}
    ids = (first.queue_item_id, steered.queue_item_id, later.queue_item_id)
    assert [items[i].turn_id for i in ids] == [t.id for t in turns]  # never dropped, never reordered
    assert {items[i].status for i in ids} == {"delivered"}
    await broker.close()


async def test_each_message_is_stored_with_its_sender_as_source(ledger: Ledger) -> None:
    """A steer from agent ``lead`` is stored as ``agent:lead``; a turn started from ``telegram:42`` as that."""
    scripted = ScriptedModel([tool_call("bash", {"command": "sleep 1"}), text("noted"), text("hello 42")])
    broker = await start_broker(ledger, scripted)
    await broker.send(AgentMessage("m-1", "user", "coder", "format the file"), "followup")
    await _until_the_model_is_called(scripted)
    steered = await broker.send(AgentMessage("m-2", "lead", "coder", "use tabs"), "steer")
    assert steered.steered
    assert await broker.wait_for_idle("coder", timeout_ms=20_000)
    (turn,) = await ledger.turns.path("agent:coder")
    users = [(m.text.rsplit("\n", 1)[-1], m.source) for m in await ledger.turns.messages(turn.id) if m.role == "user"]
    assert users == [("format the file", "user"), ("use tabs", "agent:lead")]
    chat = AgentMessage("tg-1", "telegram:42", "coder", "hi", session="dm:telegram:42")
    result = await broker.send_and_wait(chat, timeout_ms=20_000)
    assert result.success and result.turn_id is not None
    (query,) = [m for m in await ledger.turns.messages(result.turn_id) if m.role == "user"]
    assert query.source == "telegram:42"
    await broker.close()


async def test_a_spawned_sub_agent_is_a_broker_agent(ledger: Ledger) -> None:
    from nexus.engine import EngineLimits

    scripted = ScriptedModel(
        [
            tool_call("spawn_agent", {"task": "count the files", "label": "counter"}, id="sp1"),
            text("3 files"),  # the worker's turn, run by the broker
            text("The worker counted 3 files."),
        ]
    )
    env = Runtime(
        load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns(),
        limits=EngineLimits(subagent_max_depth=1),
    )  # fmt: skip
    broker = AgentBroker(ledger, env, BrokerSettings(queue=QueueSettings(mode="followup")))
    env.spawner = BrokerSpawner(broker)
    await broker.start()
    broker.register_agent(AgentIdentity("lead", "agent:lead", "manager"), spec=AgentSpec(model=scripted.model.ref))
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "lead", "delegate it"), timeout_ms=20_000)
    assert result.success and result.reply == "The worker counted 3 files."
    workers = [a for a in broker.list_agents() if a.identity.agent_id.startswith("worker-")]
    assert len(workers) == 1 and workers[0].identity.role == "worker"
    session = await ledger.sessions.get(workers[0].identity.session_label)
    assert session.is_subagent and session.parent_session_label == "agent:lead" and session.task_status == "completed"
    assert session.spawn_tool_call_id == "sp1"
    (worker_item,) = BrokerStore(ledger.database).items(agent_id=workers[0].identity.agent_id)
    assert worker_item.status == "delivered" and worker_item.sender == "lead"
    assert "spawn_agent" not in {t.name for t in scripted.calls[1].tools}  # the worker is at the depth limit
    await broker.close()


async def test_the_bundled_local_model_is_not_offered_the_agent_tools(ledger: Ledger) -> None:
    """SmolLM2-135M is a chat-only model (``Runtime.chat_only``): given ``list_agents`` and friends
    it called them over and over until its 4k context overflowed, and each call's status line went to
    the chat. A broker turn on it gets no tools at all, like ``nexus run`` on it."""
    scripted = ScriptedModel([text("4")])
    models: list[str] = []
    stream = scripted.stream

    def recording(model: Any, *args: Any, **kwargs: Any) -> Any:
        models.append(model.api)
        return stream(model, *args, **kwargs)

    scripted.stream = recording  # type: ignore[method-assign]
    broker = await start_broker(ledger, scripted)
    tiny = AgentSpec(model="local/smollm2-135m-instruct")
    broker.register_agent(AgentIdentity("tiny", "agent:tiny", "manager"), spec=tiny)
    result = await broker.send_and_wait(AgentMessage("m-1", "user", "tiny", "what is 2+2?"), timeout_ms=20_000)
    assert result.success and result.reply == "4"
    assert models == ["llama-cpp"] and scripted.calls[0].tools == []
    await broker.close()


def test_a_drain_that_closes_right_after_idle_ends_without_shutdown_errors(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """``nexus queue drain`` closes the broker as the last turn ends, then asyncio.run shuts down.

    The model streams of the last turns must close before that shutdown: asyncio.run cancels what
    is still pending, and a stream cancelled while it closes prints "async generator ignored
    GeneratorExit" (it did at the end of every drain once the broker stopped yielding in close).
    """
    import logging

    scripted = ScriptedModel([text(f"done {n}") for n in range(20)], record=False)

    async def logged_stream(*args: Any, **kwargs: Any) -> Any:  # a caller's own stream_fn wrapper
        async for event in scripted.stream(*args, **kwargs):
            yield event

    async def main() -> None:
        broker = await start_broker(ledger, scripted, stream_fn=logged_stream)
        for n in range(20):
            await broker.send(AgentMessage(f"m-{n}", "user", "coder" if n % 2 else "lead", f"task {n}"))
        await broker.wait_until_idle()
        await broker.close()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
    assert "ignored GeneratorExit" not in caplog.text
    assert "unhandled exception during asyncio.run() shutdown" not in caplog.text
    assert len(BrokerStore(ledger.database).items(statuses=("delivered",))) == 20
