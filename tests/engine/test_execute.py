"""The engine's execution core end to end: scripted model, real tools, real SQLite ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import start_context

from nexus.agent.tool_types import AgentTool, AgentToolResult
from nexus.config import load_config
from nexus.engine import AgentSpec, EngineLimits, Runtime, run_agent
from nexus.engine.execution.callbacks import EngineCallbacks
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.execute import execute
from nexus.engine.types import AssembledContext
from nexus.ledger import Ledger
from nexus.llm.abort import AbortSignal
from nexus.llm.types import AssistantMessage, ToolResultMessage, UserMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import http_error, reply, stall, text, thinking, tool_call


def make_env(
    ledger: Ledger,
    scripted: ScriptedModel,
    *,
    limits: EngineLimits | None = None,
    tools: Sequence[AgentTool] | None = None,
) -> Runtime:
    return Runtime(
        load_config(), ledger, stream_fn=scripted.stream, limits=limits, cooldowns=ProfileCooldowns(), tools=tools
    )


class Recorder:
    """Collects every callback so tests can assert on what a UI would have seen."""

    def __init__(self) -> None:
        self.partial: list[str] = []
        self.reasoning: list[str] = []
        self.tools: list[tuple[str, str, str]] = []
        self.phases: list[str] = []
        self.engine: list[Any] = []

    def callbacks(self) -> EngineCallbacks:
        return EngineCallbacks(
            on_partial_reply=self.partial.append,
            on_reasoning_stream=self.reasoning.append,
            on_tool_result=lambda cid, name, status, summary: self.tools.append((cid, name, status)),
            on_agent_event=lambda phase, ts: self.phases.append(phase),
            on_engine_event=self.engine.append,
        )


async def run(env: Runtime, message: str, session: str = "main", callbacks: EngineCallbacks | None = None) -> Any:
    model = scripted_model_of(env)
    return await env.start(AgentSpec(model=model), session, message, callbacks=callbacks).result


def scripted_model_of(env: Runtime) -> Any:
    owner = getattr(env.stream_fn, "__self__", None)
    assert isinstance(owner, ScriptedModel)
    return owner.model


async def test_multi_step_tool_run_is_written_as_one_turn(ledger: Ledger) -> None:
    scripted = ScriptedModel(
        [
            reply(thinking("plan"), tool_call("write", {"path": "a.txt", "content": "hello world"}, id="c1")),
            tool_call("read", {"path": "a.txt"}, id="c2"),
            text("The file says hello world."),
        ]
    )
    env = make_env(ledger, scripted)
    rec = Recorder()
    result = await run(env, "write then read a.txt", callbacks=rec.callbacks())

    assert result.stop_reason == "end_turn" and result.error is None
    assert [c.call_id for c in result.tool_calls] == ["c1", "c2"]
    assert all(c.status == "completed" and c.completed_at is not None for c in result.tool_calls)
    assert (env.config.workspace_path / "a.txt").read_text() == "hello world"
    assert [m.role for m in result.messages] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert result.messages[-1].text == "The file says hello world."
    assert result.usage.output > 0 and result.usage.input > 0
    # callbacks saw the stream as it happened
    assert "".join(rec.partial) == "The file says hello world."
    assert "".join(rec.reasoning) == "plan"
    assert rec.tools == [("c1", "write", "started"), ("c1", "write", "completed"), ("c2", "read", "started"),
                         ("c2", "read", "completed")]  # fmt: skip
    assert rec.phases[0] == "start" and rec.phases[-1] == "end" and "tool_use" in rec.phases
    assert rec.phases.count("streaming") == 3
    # the ledger has the turn: query + 5 response messages, 2 tool calls, pointer moved
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "completed" and head.stop_reason == "end_turn"
    assert head.message_count == 6 and head.tool_call_count == 2 and head.run_id is not None
    stored = await ledger.turns.tool_calls(head.id)
    assert [(t.call_id, t.tool_name, t.status) for t in stored] == [
        ("c1", "write", "completed"),
        ("c2", "read", "completed"),
    ]
    assert stored[1].result is not None and "hello world" in stored[1].result.text
    assert await ledger.turns.open_turns() == []
    history = await ledger.turns.history("main")
    assert len(history) == 6 and isinstance(history[-1], AssistantMessage)
    scripted.assert_complete()


async def test_second_run_sees_first_run_as_history(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("first answer"), text("second answer")])
    env = make_env(ledger, scripted)
    await run(env, "one")
    first = await ledger.sessions.head("main")
    result = await run(env, "two")
    assert result.messages[-1].text == "second answer"
    sent = scripted.calls[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert isinstance(sent[1], AssistantMessage) and sent[1].text == "first answer"
    head = await ledger.sessions.head("main")
    assert head is not None and first is not None and head.parent_turn_id == first.id
    # the current message carries the event context header
    assert isinstance(sent[2], UserMessage) and isinstance(sent[2].content, str)
    assert sent[2].content.startswith("[Event context]") and sent[2].content.endswith("two")


async def test_system_prompt_has_bootstrap_files_and_scaffolds_agents_md(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("ok")])
    env = make_env(ledger, scripted)
    workspace = env.config.workspace_path
    assert not workspace.exists()
    workspace.mkdir(parents=True)
    (workspace / "SOUL.md").write_text("Speak like a pirate.")
    await run(env, "hi")
    assert (workspace / "AGENTS.md").exists()
    prompt = scripted.calls[0].system_prompt
    assert "Speak like a pirate." in prompt and "AGENTS.md" in prompt
    tool_names = [t.name for t in scripted.calls[0].tools]
    assert {"read", "write", "edit", "bash", "spawn_agent"} <= set(tool_names)


def _write_config(home: Path, body: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(body)


async def test_tool_policy_filters_tools(ledger: Ledger, isolated_env: Path) -> None:
    _write_config(isolated_env, '[tools]\ndeny = ["group:runtime", "spawn_agent"]\n')
    scripted = ScriptedModel([text("ok")])
    env = make_env(ledger, scripted)
    await run(env, "hi")
    names = {t.name for t in scripted.calls[0].tools}
    assert "bash" not in names and "spawn_agent" not in names and "read" in names


async def test_provider_error_fails_turn_with_agent_error(ledger: Ledger) -> None:
    scripted = ScriptedModel([http_error(401)])
    env = make_env(ledger, scripted)
    result = await run(env, "hi")
    assert result.stop_reason == "error"
    assert result.error is not None and result.error.kind == "auth_failure" and not result.error.retryable
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "failed"
    assert head.error is not None and head.error["kind"] == "auth_failure"


async def test_raising_callbacks_do_not_break_the_run(ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("ui crashed")

    scripted = ScriptedModel([tool_call("ls", {}), text("fine")])
    env = make_env(ledger, scripted)
    callbacks = EngineCallbacks(boom, boom, boom, boom, boom)
    result = await run(env, "hi", callbacks=callbacks)
    assert result.stop_reason == "end_turn" and result.messages[-1].text == "fine"
    assert any("ui crashed" in r.getMessage() or r.exc_info for r in caplog.records)


async def test_max_iterations_stops_the_tool_loop(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("ls", {}, id=f"c{i}") for i in range(5)])
    env = make_env(ledger, scripted, limits=EngineLimits(max_iterations=3))
    result = await run(env, "loop forever")
    assert result.stop_reason == "tool_use" and len(result.tool_calls) == 3
    assert len(scripted.calls) == 3 and scripted.pending == 2
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "completed" and head.tool_call_count == 3


async def test_timeout_aborts_with_partial_text(ledger: Ledger) -> None:
    scripted = ScriptedModel([stall(after_chunks=3, seconds=30, then=text("partial answer that never ends"))])
    env = make_env(ledger, scripted)
    ctx = await env.assemble("hi", model=scripted.model)
    ctx.timeout_ms = 300
    result = await start_context(env, ctx, scripted.model).result
    assert result.stop_reason == "timeout"
    assert result.error is not None and result.error.kind == "timeout" and result.error.retryable
    assert result.messages[-1].role == "assistant" and result.messages[-1].text  # partial text kept
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "aborted" and head.stop_reason == "timeout"
    stored = (await ledger.turns.messages(head.id))[-1].message
    assert isinstance(stored, AssistantMessage) and stored.text == result.messages[-1].text


async def test_abort_records_aborted_turn_with_partial_text(ledger: Ledger) -> None:
    scripted = ScriptedModel([stall(after_chunks=3, seconds=30, then=text("a long answer being streamed"))])
    env = make_env(ledger, scripted)
    got_text = asyncio.Event()
    callbacks = EngineCallbacks(on_partial_reply=lambda t: got_text.set())
    execution = env.start(AgentSpec(model=scripted.model), "main", "hi", callbacks=callbacks)
    await asyncio.wait_for(got_text.wait(), 5)
    assert execution.is_streaming
    execution.abort()
    result = await execution.result
    assert result.stop_reason == "aborted" and result.error is None
    partial = result.messages[-1].text
    assert partial and "a long answer being streamed".startswith(partial)
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "aborted"
    assert not execution.is_streaming and execution.steer("too late").status == "returned"


async def test_external_signal_aborts_run_agent(ledger: Ledger) -> None:
    scripted = ScriptedModel([stall(after_chunks=2, seconds=30, then=text("never finished"))])
    signal = AbortSignal()
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, signal.abort, "user pressed stop")
    result = await run_agent(
        "hi", model=scripted.model, config=load_config(), ledger=ledger, stream_fn=scripted.stream, signal=signal
    )
    assert result.stop_reason == "aborted"
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "aborted"


def _slow_tool(started: asyncio.Event) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: object) -> AgentToolResult:
        started.set()
        await asyncio.sleep(0.2)
        return AgentToolResult.text("slow done")

    return AgentTool("slow", "a slow tool", {"type": "object", "properties": {}}, execute)


async def test_steer_injects_message_after_tool_batch(ledger: Ledger) -> None:
    started = asyncio.Event()
    scripted = ScriptedModel([tool_call("slow", {}, id="s1"), text("adjusted answer")])
    env = make_env(ledger, scripted, tools=[_slow_tool(started)])
    execution = env.start(AgentSpec(model=scripted.model), "main", "do it")
    await asyncio.wait_for(started.wait(), 5)
    receipt = execution.steer("actually, use French")
    assert receipt.status == "pending"
    result = await execution.result
    assert receipt.status == "delivered" and receipt.position == 3  # query, call, result, then the steer
    second = scripted.calls[1].messages
    assert isinstance(second[-2], ToolResultMessage) and second[-2].tool_call_id == "s1"
    assert isinstance(second[-1], UserMessage) and second[-1].content == "actually, use French"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result", "user", "assistant"]
    head = await ledger.sessions.head("main")
    assert head is not None and head.message_count == 5


async def test_events_iterator_and_on_event(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("ls", {}), text("ok")])
    env = make_env(ledger, scripted)
    execution = env.start(AgentSpec(model=scripted.model), "main", "hi")
    seen: list[str] = []
    execution.on_event(lambda e: seen.append(e.type))
    items = [event async for event in execution.events()]
    types = [item.type for item in items]
    assert types[0] == "run_start" and types[-1] == "state" and types[-2] == "run_end"
    assert "agent_start" in types and "agent_end" in types and "tool_execution_end" in types
    lifecycle = [t for t in seen if t not in ("reply_delta", "reasoning_delta")]
    assert [t for t in types if t not in ("reply_delta", "reasoning_delta")] == lifecycle  # never dropped
    assert [item.seq for item in items] == sorted({item.seq for item in items})  # one channel, in order
    assert {(item.run_id, item.session_label) for item in items} == {(execution.run_id, "main")}
    assert (await execution).stop_reason == "end_turn" and execution.state == "done"


async def test_execute_without_ledger_stores_nothing(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("no ledger")])
    env = make_env(ledger, scripted)
    ctx: AssembledContext = await env.assemble("hi", session="scratch", model=scripted.model)
    execution = execute(ctx, stream_fn=scripted.stream, model=scripted.model)
    result = await execution.result
    assert result.messages[-1].text == "no ledger" and execution.turn_id is None
    assert await ledger.sessions.head("scratch") is None


async def test_bad_model_reference_is_a_clear_config_error(ledger: Ledger) -> None:
    from nexus.errors import ConfigError

    with pytest.raises(ConfigError, match="provider/model"):
        await run_agent("hi", model="gpt-without-provider", config=load_config(), ledger=ledger)
    assert await ledger.turns.open_turns() == [] and await ledger.sessions.list() == []


async def test_empty_session_label_is_refused(ledger: Ledger) -> None:
    from nexus.errors import ConfigError

    scripted = ScriptedModel([text("never")])
    env = make_env(ledger, scripted)
    with pytest.raises(ConfigError, match="session"):
        await env.assemble("hi", session="", model=scripted.model)


async def test_stale_context_is_refused_and_nothing_is_stored(ledger: Ledger) -> None:
    from nexus.ledger import HeadMovedError

    scripted = ScriptedModel([text("first"), text("never sent")])
    env = make_env(ledger, scripted)
    stale = await env.assemble("built before the other run", model=scripted.model)
    await run(env, "another run moved the head")
    before = await ledger.sessions.head("main")
    with pytest.raises(HeadMovedError):
        await start_context(env, stale, scripted.model).result
    assert await ledger.sessions.head("main") == before and await ledger.turns.open_turns() == []
    assert scripted.pending == 1  # the model was never called


def test_window_token_estimate_matches_budget_rules_and_follows_changes() -> None:
    from nexus.engine.assembly._window import ContextWindow
    from nexus.engine.assembly.budget import estimate_context_tokens
    from nexus.engine.types import TokenBudget
    from nexus.llm.types import TextContent, Usage

    model = ScriptedModel().model
    window = ContextWindow.for_history(
        [], model=model, stream_fn=ScriptedModel().stream, limits=EngineLimits(), budget=TokenBudget(1000), emit=print
    )
    answered = AssistantMessage([TextContent("x" * 400)], usage=Usage(input=500, output=100))
    conversation: list[Any] = [UserMessage("a" * 40), answered, UserMessage("b" * 80)]
    assert window.tokens(conversation) == estimate_context_tokens(conversation) == 600 + 20
    conversation.pop()
    conversation.append(UserMessage("c" * 400))  # a replaced tail is re-estimated, not served from the cache
    assert window.tokens(conversation) == estimate_context_tokens(conversation) == 600 + 100
    no_usage: list[Any] = [UserMessage("d" * 40), AssistantMessage([TextContent("e" * 80)])]
    assert window.tokens(no_usage) == estimate_context_tokens(no_usage) == 10 + 20
