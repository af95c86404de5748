"""The agent-to-agent tools: errors the model can read, hop limit, waiting for a reply."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_runtime import FakeRuntime

from nexus.agent.tool_types import AgentToolResult
from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings
from nexus.broker.agent_tools import CallerContext, agent_tools
from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.llm.abort import AbortSignal


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        run_inline(opened.sessions.ensure(NewSession("agent:manager")))
        run_inline(opened.sessions.ensure(NewSession("agent:worker")))
        yield opened


async def setup(ledger: Ledger, *, hop: int = 0) -> tuple[AgentBroker, FakeRuntime, dict[str, object]]:
    store = BrokerStore(ledger.database)
    runner = FakeRuntime(store)
    broker = AgentBroker(ledger, runner, BrokerSettings())
    await broker.start()
    broker.register_agent(AgentIdentity("manager", "agent:manager", "manager"))
    broker.register_agent(AgentIdentity("worker", "agent:worker", "worker"))
    tools = {t.name: t for t in agent_tools(broker, CallerContext("manager", "conv-1", hop=hop, max_hops=2))}
    return broker, runner, tools  # type: ignore[return-value]


async def call(tool: object, args: dict[str, object]) -> AgentToolResult:
    return await tool.execute("call-1", args, AbortSignal(), lambda _r: None)  # type: ignore[attr-defined,no-any-return]


def text(result: AgentToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_unknown_agent_and_self_are_tool_errors(ledger: Ledger) -> None:
    broker, _, tools = await setup(ledger)
    missing = await call(tools["send_message_to_agent"], {"to": "ghost", "content": "hi"})
    assert missing.is_error and text(missing) == "No agent named 'ghost'. Known agents: worker."
    itself = await call(tools["send_message_to_agent"], {"to": "manager", "content": "hi"})
    assert itself.is_error and "yourself" in text(itself)
    empty = await call(tools["send_message_to_agent"], {"to": "worker", "content": " "})
    assert empty.is_error and "no content" in text(empty)
    assert BrokerStore(ledger.database).items() == []
    await broker.close()


async def test_send_without_waiting_queues_and_logs(ledger: Ledger) -> None:
    broker, runner, tools = await setup(ledger)
    result = await call(tools["send_message_to_agent"], {"to": "worker", "content": "review auth.py"})
    assert not result.is_error and "Its reply will arrive" in text(result)
    run = await runner.next_run(1)
    assert run.request.prompt == "[Message from manager]\nreview auth.py"
    row = ledger.database.connection.execute("SELECT from_agent, to_agent FROM broker_messages").fetchone()
    assert row == ("manager", "worker")
    run.finish()
    await broker.close()


async def test_wait_for_reply_returns_the_workers_answer(ledger: Ledger) -> None:
    broker, runner, tools = await setup(ledger)
    runner.auto_finish = True
    result = await call(tools["send_message_to_agent"], {"to": "worker", "content": "2+2?", "waitForReply": True})
    assert not result.is_error and text(result) == "ok"
    await broker.close()


async def test_hop_limit_is_reported_not_crossed(ledger: Ledger) -> None:
    broker, runner, tools = await setup(ledger, hop=2)
    result = await call(tools["send_message_to_agent"], {"to": "worker", "content": "again"})
    assert result.is_error and text(result) == (
        "Hop limit reached: your message to worker was not sent. Conversation conv-1 has already sent 2 asks "
        "between agents (their replies are not counted) and the limit is 2 (the max_hops setting of [broker] in "
        "nexus.toml). Answer with what you have instead of delegating again."
    )  # what happened, the limit, and the setting that sets it; it counts asks (it said "messages", and a
    # conversation of 2 asks and their 2 replies had carried 4)
    assert runner.runs == []
    await broker.close()


async def test_the_hop_limit_counts_the_conversations_asks_not_the_callers_chain(ledger: Ledger) -> None:
    """Refused by the conversation's count, the message named the caller's own chain (0 here), not what was
    reached."""
    broker, runner, tools = await setup(ledger, hop=0)
    for hop in (0, 1):  # two asks of the conversation went elsewhere
        broker.hops.take("conv-1", hop)
    result = await call(tools["send_message_to_agent"], {"to": "worker", "content": "again"})
    assert result.is_error and "Conversation conv-1 has already sent 2 asks between agents" in text(result)
    assert runner.runs == []
    await broker.close()


async def test_status_and_list(ledger: Ledger) -> None:
    broker, _, tools = await setup(ledger)
    status = await call(tools["get_agent_status"], {"agentId": "worker"})
    assert json.loads(text(status)) == {"agentId": "worker", "state": "idle", "queueDepth": 0}
    unknown = await call(tools["get_agent_status"], {"agentId": "nope"})
    assert unknown.is_error
    listed = json.loads(text(await call(tools["list_agents"], {})))
    assert [a["agentId"] for a in listed] == ["manager", "worker"]
    await broker.close()


async def test_a_later_reply_returns_to_the_chat_session_the_manager_asked_from(ledger: Ledger) -> None:
    broker, runner, _ = await setup(ledger)
    runner.auto_finish = True
    chat = {"channel": "tg", "account_id": "bot", "to": "1001", "reply_to_id": "77"}
    caller = CallerContext("manager", "conv-2", session="dm:telegram:42", deliver_to=chat)
    tools = {t.name: t for t in agent_tools(broker, caller)}
    sent = await call(tools["send_message_to_agent"], {"to": "worker", "content": "look into it"})
    assert not sent.is_error
    assert await broker.wait_for_idle("worker", timeout_ms=30_000)
    assert await broker.wait_for_idle("manager", timeout_ms=30_000)
    [answer] = [run.request for run in runner.runs if run.request.agent_id == "manager"]
    assert answer.session_key == "dm:telegram:42" and answer.session_label == "manager~dm~telegram~42"
    assert answer.deliver_to == chat  # the manager's answer goes to the chat it was asked from
    await broker.close()


class _ToolsSeen(FakeRuntime):
    """A fake runtime that keeps the agent tools each run was started with."""

    def __init__(self, store: BrokerStore) -> None:
        super().__init__(store)
        self.tools: dict[str, list[object]] = {}
        """Each run's tools, by its prompt."""

    def start(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        self.tools[str(args[2])] = list(kwargs["tools"])  # type: ignore[call-overload]
        return super().start(*args, **kwargs)  # type: ignore[arg-type]


async def test_plain_turns_of_a_session_share_their_tools_until_a_turn_starts_a_conversation(ledger: Ledger) -> None:
    """The send tool of a plain turn holds nothing of the turn until it sends (then the turn's conversation id):
    the session's next plain turn takes it as it is, and a fresh one once a turn sent (each turn its own
    conversation)."""
    runner = _ToolsSeen(BrokerStore(ledger.database))
    runner.auto_finish = True
    broker = AgentBroker(ledger, runner, BrokerSettings())
    await broker.start()
    broker.register_agent(AgentIdentity("manager", "agent:manager", "manager"))
    broker.register_agent(AgentIdentity("worker", "agent:worker", "worker"))
    for n in range(2):
        await broker.send(AgentMessage(id=f"u{n}", from_="user", to="worker", content=f"task {n}"))
        assert await broker.wait_for_idle("worker", timeout_ms=2000)
    first, second = runner.tools["task 0"], runner.tools["task 1"]
    assert second[0] is first[0]  # the same send tool: nothing of the first turn in it
    assert not (await call(first[0], {"to": "manager", "content": "from the second turn"})).is_error
    await broker.send(AgentMessage(id="u2", from_="user", to="worker", content="task 2"))
    assert await broker.wait_for_idle("worker", timeout_ms=2000)
    third = runner.tools["task 2"][0]
    assert third is not first[0]  # that tool started a conversation: the next turn gets its own tool
    assert not (await call(third, {"to": "manager", "content": "from the third turn"})).is_error
    assert await broker.wait_for_idle("manager", timeout_ms=2000)
    sent = [item for item in await ledger.queue.items(agent_id="manager") if item.sender == "worker"]
    conversations = [item.message["conversation_id"] for item in sent]  # type: ignore[index]
    assert len(conversations) == 2 and None not in conversations and len(set(conversations)) == 2
    await broker.close()
