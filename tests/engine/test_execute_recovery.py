"""Overflow recovery (compaction, truncation, give up) and failover inside full engine runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nexus.agent.tool_types import AgentTool
from nexus.config import load_config
from nexus.engine import (
    AgentSpec,
    CompactionEndEvent,
    CompactionStartEvent,
    EngineLimits,
    FallbackEvent,
    RetryEvent,
    Runtime,
)
from nexus.engine.execution.callbacks import EngineCallbacks
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.llm.types import Model, ToolResultMessage, UserMessage
from nexus.testing import FakeProviderServer, ScriptedModel
from nexus.testing.steps import http_error, overflow, text, tool_call


def make_env(
    ledger: Ledger,
    scripted: ScriptedModel | None = None,
    *,
    limits: EngineLimits | None = None,
    tools: Sequence[AgentTool] | None = None,
    cooldowns: ProfileCooldowns | None = None,
) -> Runtime:
    return Runtime(
        load_config(),
        ledger,
        stream_fn=scripted.stream if scripted is not None else None,
        limits=limits,
        cooldowns=cooldowns or ProfileCooldowns(),
        tools=tools,
    )


async def run(env: Runtime, model: Model, message: str, events: list[Any] | None = None) -> Any:
    callbacks = EngineCallbacks(on_engine_event=events.append if events is not None else None)
    return await env.start(AgentSpec(model=model), "main", message, callbacks=callbacks).result


def summary_text(message: object) -> str | None:
    prefix = "[Previous conversation summary]\n"
    if isinstance(message, UserMessage) and isinstance(message.content, str) and message.content.startswith(prefix):
        return message.content[len(prefix) :]
    return None


async def test_overflow_compacts_retries_and_writes_compaction_turn(ledger: Ledger) -> None:
    scripted = ScriptedModel(
        [
            text("first answer " * 20),
            text("second answer " * 150),  # ~2,100 chars: the kept part
            overflow(),
            text("SUMMARY: user asked two things"),
            text("third answer"),
            text("fourth answer"),
        ]
    )
    env = make_env(ledger, scripted, limits=EngineLimits(keep_recent_tokens=300))
    await run(env, scripted.model, "one")
    await run(env, scripted.model, "two")
    second = await ledger.sessions.head("main")
    events: list[Any] = []
    result = await run(env, scripted.model, "three", events)

    assert result.stop_reason == "end_turn" and result.messages[-1].text == "third answer"
    assert result.compaction is not None and result.compaction.trigger == "overflow_recovery"
    assert result.compaction.summary == "SUMMARY: user asked two things"
    assert [type(e) for e in events] == [CompactionStartEvent, CompactionEndEvent]
    # the retry was sent the summary, then the kept answer (two), then the current message
    retry = scripted.calls[4].messages
    assert summary_text(retry[0]) == "SUMMARY: user asked two things"
    assert [m.role for m in retry] == ["user", "assistant", "user"]
    # ledger: the run's turn is the compaction turn, with its compactions row
    head = await ledger.sessions.head("main")
    assert head is not None and second is not None
    assert head.turn_type == "compaction" and head.status == "completed"
    record = await ledger.turns.compaction(head.id)
    assert record is not None and record.summary == "SUMMARY: user asked two things"
    assert record.first_kept_turn_id == second.id and record.trigger == "overflow_recovery"
    assert record.summarized_through_turn_id == second.id  # the cut fell inside turn two (its query was summarised)
    # history after compaction: summary, the whole kept turn (the ledger keeps whole turns), the compaction turn
    history = await ledger.turns.history("main")
    assert summary_text(history[0]) == "SUMMARY: user asked two things"
    assert len(history) == 5 and history[-1].role == "assistant"
    # the next run starts from that history
    await run(env, scripted.model, "four")
    assert summary_text(scripted.calls[5].messages[0]) == "SUMMARY: user asked two things"
    assert len(scripted.calls[5].messages) == 6
    scripted.assert_complete()


async def test_overflow_with_nothing_kept_from_history(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("old answer " * 30), overflow(), text("SUM"), text("new answer")])
    env = make_env(ledger, scripted, limits=EngineLimits(keep_recent_tokens=1))
    await run(env, scripted.model, "one")
    result = await run(env, scripted.model, "two")
    assert result.stop_reason == "end_turn" and result.compaction is not None
    head = await ledger.sessions.head("main")
    assert head is not None
    record = await ledger.turns.compaction(head.id)
    assert record is not None and record.first_kept_turn_id is None
    history = await ledger.turns.history("main")
    assert summary_text(history[0]) == "SUM"
    assert [m.role for m in history] == ["user", "user", "assistant"]  # summary + this turn


async def test_proactive_compaction_when_budget_exceeded(ledger: Ledger) -> None:
    tiny = Model("tiny", "scripted", "scripted", context_window=8_000, max_tokens=500)
    bulky = [text("x" * 8_000) for _ in range(3)]
    scripted = ScriptedModel([*bulky, text("SUMMARY"), text("answer")], model=tiny)
    env = make_env(ledger, scripted, limits=EngineLimits(keep_recent_tokens=50), tools=[])
    for message in ("one", "two", "three"):
        await run(env, tiny, message)
    assert len(scripted.calls) == 3  # no compaction while the history fitted
    events: list[Any] = []
    result = await run(env, tiny, "four", events)
    assert result.compaction is not None and result.compaction.trigger == "context_limit"
    assert result.messages[-1].text == "answer" and result.stop_reason == "end_turn"
    sent = scripted.calls[4].messages
    assert summary_text(sent[0]) == "SUMMARY"
    assert sum("x" * 1000 in str(m) for m in sent) == 1  # only the newest answer is kept verbatim
    head = await ledger.sessions.head("main")
    assert head is not None and head.turn_type == "compaction"
    assert any(isinstance(e, CompactionStartEvent) and e.reason == "context_limit" for e in events)


async def test_level_two_truncates_tool_results_then_succeeds(ledger: Ledger, isolated_env: Path) -> None:
    scripted = ScriptedModel([tool_call("read", {"path": "big.txt"}), overflow(), text("read it")])
    env = make_env(ledger, scripted, limits=EngineLimits(overflow_tool_result_chars=2_000))
    workspace = env.config.workspace_path
    workspace.mkdir(parents=True)
    (workspace / "big.txt").write_text("line of text\n" * 3_000)  # ~39k chars, under the 50k cap
    result = await run(env, scripted.model, "read big.txt")
    assert result.stop_reason == "end_turn" and result.messages[-1].text == "read it"
    assert result.compaction is None  # nothing old enough to summarise: level 2 did it
    sent = [m for m in scripted.calls[2].messages if isinstance(m, ToolResultMessage)]
    assert len(sent) == 1 and len(sent[0].text) < 3_000
    stored = await ledger.turns.tool_calls((await ledger.sessions.head("main")).id)  # type: ignore[union-attr]
    assert stored[0].result is not None and len(stored[0].result.text) > 20_000  # the ledger keeps it whole


async def test_level_three_gives_up_with_context_overflow(ledger: Ledger) -> None:
    scripted = ScriptedModel([overflow(), overflow()])
    env = make_env(ledger, scripted)
    result = await run(env, scripted.model, "hi")
    assert result.stop_reason == "error"
    assert result.error is not None and result.error.kind == "context_overflow"
    assert "context window" in result.error.message
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "failed" and head.error is not None
    assert head.error["kind"] == "context_overflow"


async def test_compaction_failure_is_reported(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("old " * 50), overflow(), http_error(400, "bad summariser request"), overflow()])
    env = make_env(ledger, scripted, limits=EngineLimits(keep_recent_tokens=1))
    await run(env, scripted.model, "one")
    result = await run(env, scripted.model, "two")
    assert result.stop_reason == "error"
    assert result.error is not None and result.error.kind == "compaction_failure"
    head = await ledger.sessions.head("main")
    assert head is not None and head.status == "failed" and head.turn_type == "normal"


def _write_config(home: Path, body: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(body)


async def test_429_rotates_to_next_auth_profile_over_http(ledger: Ledger, isolated_env: Path) -> None:
    async with FakeProviderServer(http_error(429, retry_after=1), text("hello from key two")) as server:
        _write_config(
            isolated_env,
            f'default_model = "fake/fake-model"\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{server.openai_base_url}"\n'
            'auth_profiles = [{name = "first", api_key = "key-1"}, {name = "second", api_key = "key-2"}]\n',
        )
        env = make_env(ledger)
        events: list[Any] = []
        model = env.model(None)
        result = await run(env, model, "hi", events)
        assert result.stop_reason == "end_turn" and result.messages[-1].text == "hello from key two"
        assert [r.headers.get("authorization") for r in server.requests] == ["Bearer key-1", "Bearer key-2"]
        retries = [e for e in events if isinstance(e, RetryEvent)]
        assert len(retries) == 1 and retries[0].profile == "first" and retries[0].next_profile == "second"
        assert retries[0].error_kind == "rate_limit"
        head = await ledger.sessions.head("main")
        assert head is not None and head.status == "completed" and head.model == "fake-model"


async def test_all_profiles_cooling_waits_then_succeeds(ledger: Ledger, isolated_env: Path) -> None:
    _write_config(
        isolated_env,
        '[providers.scripted]\nauth_profiles = [{name = "a", api_key = "k1"}, {name = "b", api_key = "k2"}]\n',
    )
    scripted = ScriptedModel([http_error(429), http_error(429), text("finally")])
    env = make_env(ledger, scripted, cooldowns=ProfileCooldowns(initial_s=0.05, max_s=0.1))
    events: list[Any] = []
    result = await run(env, scripted.model, "hi", events)
    assert result.stop_reason == "end_turn" and result.messages[-1].text == "finally"
    kinds = [type(e) for e in events]
    assert kinds == [RetryEvent, RetryEvent]  # the wait is announced by the second retry, not again
    wait = events[1]
    assert isinstance(wait, RetryEvent) and 0 < wait.delay_s <= 1.0 and wait.next_profile == "a"  # retry-after: 1


async def test_fallback_model_used_when_primary_keeps_failing(ledger: Ledger, isolated_env: Path) -> None:
    _write_config(isolated_env, 'fallbacks = ["scripted/backup"]\n')
    scripted = ScriptedModel([http_error(503, "overloaded"), text("from backup")])
    env = make_env(ledger, scripted, limits=EngineLimits(max_retries=0))
    events: list[Any] = []
    result = await run(env, scripted.model, "hi", events)
    assert result.messages[-1].text == "from backup"
    fallback = [e for e in events if isinstance(e, FallbackEvent)]
    assert len(fallback) == 1 and fallback[0].to_model == "scripted/backup" and fallback[0].budget is not None


async def test_second_compaction_updates_the_previous_summary(ledger: Ledger) -> None:
    scripted = ScriptedModel(
        [
            text("a1 " * 40),
            overflow(),
            text("SUMMARY ONE"),
            text("a2 " * 40),
            text("a3 " * 40),
            overflow(),
            text("SUMMARY TWO"),
            text("a4"),
        ]
    )
    env = make_env(ledger, scripted, limits=EngineLimits(keep_recent_tokens=1))
    for message in ("one", "two", "three", "four"):
        await run(env, scripted.model, message)
    first_compaction, second_compaction = [t for t in await ledger.turns.path("main") if t.turn_type == "compaction"]
    summariser_prompt = scripted.calls[6].messages[0]
    assert isinstance(summariser_prompt, UserMessage) and "SUMMARY ONE" in str(summariser_prompt.content)
    assert "<previous-summary>" in str(summariser_prompt.content)
    record = await ledger.turns.compaction(second_compaction.id)
    assert record is not None and record.summary == "SUMMARY TWO" and record.first_kept_turn_id is None
    history = await ledger.turns.history("main")
    assert summary_text(history[0]) == "SUMMARY TWO" and len(history) == 3
    assert first_compaction.id in await ledger.turns.ancestry(second_compaction.id)


async def test_steering_is_refused_while_compacting(ledger: Ledger) -> None:
    import asyncio

    from nexus.llm.options import StreamOptions

    scripted = ScriptedModel([text("old " * 40), overflow(), text("SUM"), text("answer")])
    entered, release = asyncio.Event(), asyncio.Event()

    async def gated(model: Model, context: Any, options: StreamOptions | None = None) -> Any:
        if "summarization assistant" in context.system_prompt:  # hold the summary call open
            entered.set()
            await release.wait()
        async for event in scripted.stream(model, context, options):
            yield event

    env = Runtime(
        load_config(), ledger, stream_fn=gated, limits=EngineLimits(keep_recent_tokens=1), cooldowns=ProfileCooldowns()
    )
    await run(env, scripted.model, "one")
    execution = env.start(AgentSpec(model=scripted.model), "main", "two")
    await asyncio.wait_for(entered.wait(), 5)
    assert execution.is_compacting and execution.is_streaming
    receipt = execution.steer("wait for me")
    assert receipt.status == "returned" and receipt.reason == "the run is compacting its history"
    release.set()
    result = await execution.result
    assert result.returned_steers == []  # returned at once: the caller had it back already
    assert not execution.is_compacting and result.messages[-1].text == "answer"
    assert [m.role for m in result.messages] == ["user", "assistant"]
