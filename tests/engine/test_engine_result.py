"""AgentResult is the turn as the ledger stored it: turn id, message ids, tool calls, compactions, reply."""

from __future__ import annotations

from nexus.config import load_config
from nexus.engine import AgentSpec, EngineLimits, EventContext, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.llm.types import Model
from nexus.testing import ScriptedModel
from nexus.testing.steps import text, tool_call


def _env(ledger: Ledger, scripted: ScriptedModel, **kw: object) -> Runtime:
    return Runtime(
        load_config(),
        ledger,
        stream_fn=scripted.stream,
        cooldowns=ProfileCooldowns(),
        **kw,  # type: ignore[arg-type]
    )


async def test_result_ids_are_the_ledgers(ledger: Ledger) -> None:
    scripted = ScriptedModel([tool_call("ls", {}, id="c1"), text("two files")])
    env = _env(ledger, scripted)
    execution = env.start(AgentSpec(model=scripted.model), "main", "what is here?")
    result = await execution.result
    head = await ledger.sessions.head("main")
    assert head is not None and result.turn_id == head.id == execution.turn_id
    stored = await ledger.turns.messages(head.id)
    assert [m.id for m in result.messages] == [m.id for m in stored]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert result.reply == "two files"
    calls = await ledger.turns.tool_calls(head.id)
    assert [c.call_id for c in result.tool_calls] == [c.call_id for c in calls] == ["c1"]
    assert result.tool_calls[0].status == "completed" and result.tool_calls[0].result is not None


async def test_every_compaction_of_a_run_is_in_the_result_with_turn_ids(ledger: Ledger) -> None:
    tiny = Model("tiny", "scripted", "scripted", context_window=8_000, max_tokens=500)
    bulky = [text("x" * 8_000) for _ in range(3)]
    scripted = ScriptedModel([*bulky, text("SUMMARY"), text("answer")], model=tiny)
    env = _env(ledger, scripted, limits=EngineLimits(keep_recent_tokens=50), tools=[])
    for message in ("one", "two", "three"):
        await env.start(AgentSpec(model=tiny), "main", message).result
    turns = await ledger.turns.path("main")
    result = await env.start(AgentSpec(model=tiny), "main", "four").result
    assert len(result.compactions) == 1 and result.compaction is result.compactions[0]
    record = result.compactions[0]
    head = await ledger.sessions.head("main")
    assert head is not None and record.turn_id == head.id == result.turn_id
    assert record.summarized_through_turn_id in {t.id for t in turns}
    stored = await ledger.turns.compaction(head.id)
    assert stored is not None and stored.summary == record.summary == "SUMMARY"
    assert stored.summarized_through_turn_id == record.summarized_through_turn_id


async def test_run_without_ledger_numbers_messages_by_ordinal(ledger: Ledger) -> None:
    from nexus.engine.execution.execute import execute

    scripted = ScriptedModel([text("no ledger")])
    env = _env(ledger, scripted)
    ctx = await env.assemble("hi", model=scripted.model)
    result = await execute(ctx, stream_fn=scripted.stream, model=scripted.model)
    assert result.turn_id is None and [m.id for m in result.messages] == [0, 1] and result.reply == "no ledger"


async def test_a_turn_records_what_the_model_was_told(ledger: Ledger) -> None:
    scripted = ScriptedModel([text("one"), text("two")])
    env = _env(ledger, scripted)
    execution = env.start(AgentSpec(model=scripted.model), "main", "hello", event=EventContext(channel="telegram"))
    first = await execution.result
    ctx = execution.context
    assert ctx is not None
    second = await env.start(AgentSpec(model=scripted.model), "main", "again").result
    turns = {t.id: t for t in await ledger.turns.path("main")}
    key = turns[first.turn_id or ""].system_prompt_hash
    assert key is not None and await ledger.turns.system_prompt(key) == ctx.system_prompt
    assert turns[second.turn_id or ""].system_prompt_hash is not None
    query = first.messages[0]
    assert query.source == "telegram" and second.messages[0].source == "user"
    assert query.context is not None and query.context["model"] == "scripted/scripted-1"
    assert query.context["history_messages"] == 0 and second.messages[0].context["history_messages"] == 2  # type: ignore[index]
