"""The ``spawn_agent`` tool: worker sessions linked to their parent, depth limit, failures."""

from __future__ import annotations

from nexus.config import load_config
from nexus.engine import AgentSpec, EngineLimits, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.execute import execute
from nexus.engine.execution.scope import CURRENT_RUN, RunScope
from nexus.engine.wiring.spawn import spawn_agent_tool, worker_label
from nexus.ledger import Ledger, SessionQuery
from nexus.llm.abort import AbortSignal
from nexus.llm.types import ToolResultMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import http_error, text, tool_call


def make_env(ledger: Ledger, scripted: ScriptedModel, limits: EngineLimits | None = None) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=scripted.stream, limits=limits, cooldowns=ProfileCooldowns())


def tool_results(scripted: ScriptedModel, call: int) -> list[ToolResultMessage]:
    return [m for m in scripted.calls[call].messages if isinstance(m, ToolResultMessage)]


async def test_spawned_worker_runs_in_linked_session(ledger: Ledger) -> None:
    scripted = ScriptedModel(
        [
            tool_call("spawn_agent", {"task": "count the files", "label": "counter"}, id="sp1"),
            text("worker says: 3 files"),  # the worker's only model call
            text("The worker found 3 files."),
        ]
    )
    env = make_env(ledger, scripted, EngineLimits(subagent_max_depth=1))
    execution = env.start(AgentSpec(model=scripted.model), "main", "delegate it")
    result = await execution.result

    assert result.stop_reason == "end_turn" and result.messages[-1].text == "The worker found 3 files."
    [call] = result.tool_calls
    assert call.tool_name == "spawn_agent" and call.status == "completed"
    label = call.spawned_session_label
    assert label is not None and label.startswith("main/counter-")
    # the worker got the task (with event context) and, at the depth limit, no spawn tool
    worker_call = scripted.calls[1]
    assert str(worker_call.messages[-1].content).endswith("count the files")
    assert "spawn_agent" not in {t.name for t in worker_call.tools}
    assert "spawn_agent" in {t.name for t in scripted.calls[0].tools}
    assert tool_results(scripted, 2)[0].text == "worker says: 3 files"
    # ledger: worker session linked to the parent session, turn and tool call
    worker = await ledger.sessions.get(label)
    parent_head = await ledger.sessions.head("main")
    assert parent_head is not None
    assert worker.is_subagent and worker.parent_session_label == "main"
    assert worker.parent_turn_id == parent_head.id == execution.turn_id
    assert worker.spawn_tool_call_id == "sp1" and worker.task_description == "count the files"
    assert worker.task_status == "completed"
    worker_head = await ledger.sessions.head(label)
    assert worker_head is not None and worker_head.status == "completed" and worker_head.role == "worker"
    [stored] = await ledger.turns.tool_calls(parent_head.id)
    assert stored.spawned_session_label == label
    scripted.assert_complete()


async def test_worker_beyond_depth_limit_cannot_spawn(ledger: Ledger) -> None:
    scripted = ScriptedModel(
        [
            tool_call("spawn_agent", {"task": "outer"}, id="sp1"),
            tool_call("spawn_agent", {"task": "inner"}, id="sp2"),  # the worker tries to go deeper
            text("worker gave up nesting"),
            text("done"),
        ]
    )
    env = make_env(ledger, scripted, EngineLimits(subagent_max_depth=1))
    result = await env.start(AgentSpec(model=scripted.model), "main", "go").result
    assert result.stop_reason == "end_turn"
    refused = tool_results(scripted, 2)[0]
    assert refused.is_error and 'Tool "spawn_agent" not found' in refused.text
    assert len(await ledger.sessions.list(SessionQuery(is_subagent=True))) == 1


async def test_spawn_tool_refuses_past_the_depth_limit_with_clear_error(ledger: Ledger) -> None:
    scripted = ScriptedModel([])
    limits = EngineLimits(subagent_max_depth=2)
    env = make_env(ledger, scripted, limits)
    scope = RunScope("main", None, 2, scripted.model, env, AbortSignal(), limits)
    token = CURRENT_RUN.set(scope)
    try:
        result = await spawn_agent_tool().execute("c1", {"task": "x"}, AbortSignal(), lambda r: None)
    finally:
        CURRENT_RUN.reset(token)
    assert result.is_error and "subagent_max_depth=2" in result.content[0].text  # type: ignore[union-attr]
    assert await ledger.sessions.list(SessionQuery(is_subagent=True)) == []


async def test_failed_worker_marks_task_failed_and_returns_error(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("spawn_agent", {"task": "t"}, id="sp1"), http_error(401), text("ok")])
    env = make_env(ledger, scripted)
    result = await env.start(AgentSpec(model=scripted.model), "main", "go").result
    [call] = result.tool_calls
    assert call.status == "failed" and call.spawned_session_label is not None
    assert call.error is not None and "did not finish" in call.error
    assert (await ledger.sessions.get(call.spawned_session_label)).task_status == "failed"
    head = await ledger.sessions.head("main")
    assert head is not None and (await ledger.turns.tool_calls(head.id))[0].status == "failed"


async def test_spawn_with_bad_arguments_is_an_error_result(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("spawn_agent", {"label": "no task"}), text("ok")])
    env = make_env(ledger, scripted)
    result = await env.start(AgentSpec(model=scripted.model), "main", "go").result
    [call] = result.tool_calls
    assert call.status == "failed" and call.error is not None and "needs 'task'" in call.error
    assert await ledger.sessions.list(SessionQuery(is_subagent=True)) == []


async def test_spawn_without_engine_env_explains(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("spawn_agent", {"task": "t"}), text("ok")])
    env = make_env(ledger, scripted)
    ctx = await env.assemble("go", model=scripted.model)
    result = await execute(ctx, stream_fn=scripted.stream, model=scripted.model).result  # no env
    [call] = result.tool_calls
    assert call.status == "failed" and call.error is not None and "engine runtime" in call.error


def test_worker_label_is_unique_and_safe() -> None:
    first, second = worker_label("main", "my task!"), worker_label("main", "my task!")
    assert first != second and first.startswith("main/my-task-")
    assert worker_label("s", None).startswith("s/task-")


async def test_worker_tool_activity_is_reported_as_spawn_progress(ledger: Ledger) -> None:
    from nexus.agent import ToolExecutionUpdateEvent

    scripted = ScriptedModel(
        [
            tool_call("spawn_agent", {"task": "list files"}, id="sp1"),
            tool_call("ls", {}, id="w1"),  # the worker uses a tool
            text("worker: nothing here"),
            text("done"),
        ]
    )
    env = make_env(ledger, scripted)
    execution = env.start(AgentSpec(model=scripted.model), "main", "go")
    updates: list[str] = []
    execution.on_event(
        lambda e: (
            updates.append(e.event.partial_result.content[0].text)
            if isinstance(e.event, ToolExecutionUpdateEvent)
            else None
        )
    )
    result = await execution.result
    assert result.stop_reason == "end_turn"
    assert [u.split("] ")[1] for u in updates] == ["ls: started", "ls: completed"]
    assert all(u.startswith(f"[{result.tool_calls[0].spawned_session_label}]") for u in updates)
