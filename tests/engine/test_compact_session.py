"""Manual compaction of a stored session (``compact_session`` / ``Runtime.compact``)."""

from __future__ import annotations

import asyncio

import pytest

from nexus.config import load_config
from nexus.engine import Runtime
from nexus.engine.assembly.compaction import SUMMARY_PREFIX, SUMMARY_SYSTEM_PROMPT, CompactionError
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.session_lock import session_lock
from nexus.engine.types import CompactionEndEvent, CompactionStartEvent, EngineEvent
from nexus.engine.wiring.compact_session import SessionCompaction, compact_session
from nexus.ledger import Ledger, NewSession, SessionNotFound, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.abort import AbortSignal
from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import http_error, text

LONG = "word " * 300


def make_env(ledger: Ledger, scripted: ScriptedModel) -> Runtime:
    return Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())


def answer(content: str) -> AssistantMessage:
    return AssistantMessage([TextContent(content)], stop_reason="stop")


def seed(ledger: Ledger, turns: int = 3, session: str = "main") -> list[str]:
    """``turns`` question/answer turns of about 600 tokens each; returns their ids."""
    run_inline(ledger.sessions.ensure(NewSession(session)))
    return [
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    session,
                    None,
                    query_messages=[UserMessage(f"question {i} {LONG}")],
                    response_messages=[answer(f"answer {i} {LONG}")],
                )
            )
        )
        for i in range(turns)
    ]


async def test_summary_is_written_as_a_manual_compaction_turn_and_heads_the_history(ledger: Ledger) -> None:
    ids = seed(ledger)
    scripted = ScriptedModel([text("## Goal\nTesting manual compaction.")])
    events: list[EngineEvent] = []
    env = make_env(ledger, scripted)
    outcome = await env.compact("main", focus="the goal", model=scripted.model, on_event=events.append)

    assert isinstance(outcome, SessionCompaction) and outcome.compacted and outcome.status == "compacted"
    assert outcome.result is not None and outcome.result.trigger == "manual"
    assert outcome.result.tokens_after < outcome.result.tokens_before
    assert outcome.message.startswith(f"compacted {outcome.messages_summarized} messages")
    turns = await ledger.turns.path("main")
    assert [t.turn_type for t in turns] == ["normal", "normal", "normal", "compaction"]
    assert turns[-1].id == outcome.turn_id and turns[-1].message_count == 0
    record = await ledger.turns.compaction(turns[-1].id)
    assert record is not None and record.trigger == "manual" and "Testing manual compaction" in record.summary
    assert record.first_kept_turn_id == ids[2] and record.summarized_through_turn_id == ids[1]
    assert record.model == scripted.model.id and record.summarization_output_tokens > 0
    history = await ledger.turns.history("main")
    first = history[0]
    assert isinstance(first, UserMessage) and isinstance(first.content, str)
    assert first.content == SUMMARY_PREFIX + "## Goal\nTesting manual compaction."
    assert [m.text for m in history[1:] if isinstance(m, AssistantMessage)] == [f"answer 2 {LONG}"]
    call = scripted.calls[0]
    assert call.system_prompt == SUMMARY_SYSTEM_PROMPT
    prompt = str(call.messages[0].content)
    assert "question 0" in prompt and "Additional focus: the goal" in prompt
    assert "question 2" not in prompt, "the kept turn is not summarised"
    assert isinstance(events[0], CompactionStartEvent) and events[0].reason == "manual"
    assert isinstance(events[-1], CompactionEndEvent) and events[-1].result is outcome.result


async def test_a_second_compaction_updates_the_previous_summary(ledger: Ledger) -> None:
    seed(ledger, turns=3)
    scripted = ScriptedModel([text("first summary"), text("second summary")])
    env = make_env(ledger, scripted)
    assert (await env.compact("main", model=scripted.model)).compacted
    seed(ledger, turns=3)
    second = await compact_session("main", runtime=env, model=scripted.model)
    assert second.compacted
    assert "<previous-summary>\nfirst summary" in str(scripted.calls[1].messages[0].content)
    first = (await ledger.turns.history("main"))[0]
    assert isinstance(first, UserMessage) and first.content == SUMMARY_PREFIX + "second summary"
    assert sum(1 for t in run_inline(ledger.turns.path("main")) if t.turn_type == "compaction") == 2


async def test_nothing_is_written_when_the_summary_would_not_shrink_the_context(ledger: Ledger) -> None:
    seed(ledger, turns=2)
    scripted = ScriptedModel([text("An extremely long summary. " + "detail " * 3000)])
    events: list[EngineEvent] = []
    outcome = await make_env(ledger, scripted).compact("main", model=scripted.model, on_event=events.append)
    assert outcome.status == "not_smaller" and not outcome.compacted and outcome.turn_id is None
    assert outcome.result is not None and outcome.result.tokens_after >= outcome.result.tokens_before
    assert "not compacted" in outcome.message and "nothing was changed" in outcome.message
    assert [t.turn_type for t in await ledger.turns.path("main")] == ["normal", "normal"]
    assert not str((await ledger.turns.history("main"))[0].content).startswith(SUMMARY_PREFIX)
    end = events[-1]
    assert isinstance(end, CompactionEndEvent) and end.result is None and end.error is not None


async def test_an_empty_session_has_nothing_to_compact_and_makes_no_call(ledger: Ledger) -> None:
    await ledger.sessions.ensure(NewSession("empty"))
    scripted = ScriptedModel([text("never used")])
    outcome = await make_env(ledger, scripted).compact("empty", model=scripted.model)
    assert outcome.status == "nothing_to_compact" and "nothing to compact yet" in outcome.message
    assert scripted.calls == [] and await ledger.turns.path("empty") == []


@pytest.mark.parametrize("door", ["compact_session", "runtime.compact"])  # the method took no keep_recent_tokens
async def test_a_tool_call_and_its_result_are_never_split(ledger: Ledger, door: str) -> None:
    await ledger.sessions.ensure(NewSession("main"))
    call = ToolCall("c1", "read", {"path": "a.txt"})
    await ledger.turns.write(
        TurnWrite(
            "main",
            None,
            query_messages=[UserMessage("read a.txt " + LONG)],
            response_messages=[
                AssistantMessage([call], stop_reason="tool_use"),
                ToolResultMessage("c1", "read", [TextContent("file body " + LONG)]),
                answer("done"),
            ],
        )
    )
    scripted = ScriptedModel([text("short summary")])
    # keep just the last ~310 tokens: the walk back lands on the tool result, so the cut moves to its call
    env = make_env(ledger, scripted)
    if door == "compact_session":
        outcome = await compact_session("main", runtime=env, model=scripted.model, keep_recent_tokens=310)
    else:
        outcome = await env.compact("main", model=scripted.model, keep_recent_tokens=310, on_wait=lambda: None)
    assert outcome.result is not None
    history = await ledger.turns.history_at((await ledger.turns.path("main"))[0].id)
    kept = history[outcome.messages_summarized]  # the kept part starts right after the summarised messages
    assert isinstance(kept, AssistantMessage) and kept.tool_calls == [call]
    assert "[Tool result]" not in str(scripted.calls[0].messages[0].content)


async def test_waits_for_the_session_lock_and_aborts_cleanly_while_waiting(ledger: Ledger) -> None:
    seed(ledger)
    scripted = ScriptedModel([text("summary after the run")])
    env = make_env(ledger, scripted)
    waited: list[bool] = []
    async with session_lock(ledger.path, "main") as held:
        assert held
        task = asyncio.create_task(
            compact_session("main", runtime=env, model=scripted.model, on_wait=lambda: waited.append(True))
        )
        await asyncio.sleep(0.3)
        assert not task.done() and waited == [True] and scripted.calls == [], "nothing happens while a run holds it"
        abort = AbortSignal()
        aborted = asyncio.create_task(env.compact("main", model=scripted.model, signal=abort))
        await asyncio.sleep(0.1)
        abort.abort("stop")
        assert (await aborted).status == "aborted"
    outcome = await task
    assert outcome.compacted and len(scripted.calls) == 1
    assert [t.turn_type for t in await ledger.turns.path("main")][-1] == "compaction"


async def test_unknown_session_raises_session_not_found_and_creates_nothing(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("never used")])
    with pytest.raises(SessionNotFound) as info:
        await make_env(ledger, scripted).compact("no-such-session", model=scripted.model)
    assert info.value.label == "no-such-session"
    assert scripted.calls == [] and await ledger.sessions.list() == []


async def test_summariser_failure_raises_and_writes_nothing(ledger: Ledger) -> None:
    seed(ledger)
    scripted = ScriptedModel([http_error(400, "bad request: invalid parameter")])
    events: list[EngineEvent] = []
    with pytest.raises(CompactionError, match="summarisation failed") as info:
        await make_env(ledger, scripted).compact("main", model=scripted.model, on_event=events.append)
    assert info.value.error.kind == "compaction_failure"
    assert [t.turn_type for t in await ledger.turns.path("main")] == ["normal", "normal", "normal"]
    end = events[-1]
    assert isinstance(end, CompactionEndEvent) and end.result is None and "summarisation failed" in (end.error or "")
