"""Compaction: the cut point, the summary prompt and call, level 2 truncation, level 3 error."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator

import pytest

from nexus.engine import AgentError, CompactionEndEvent, EngineLimits
from nexus.engine.assembly._window import ContextWindow
from nexus.engine.assembly.budget import estimate_tokens, should_compact
from nexus.engine.assembly.compaction import (
    CompactionError,
    compact,
    overflow_error,
    plan_compaction,
    serialize_transcript,
    summarize,
    truncate_tool_results,
)
from nexus.engine.types import EngineEvent, TokenBudget
from nexus.ledger.records import SUMMARY_PREFIX
from nexus.llm.events import AssistantMessageEvent, DoneEvent, ErrorEvent
from nexus.llm.options import StreamOptions
from nexus.llm.types import (
    AssistantMessage,
    Context,
    Message,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

MODEL = Model("m", "prov", "test-api", context_window=100_000, max_tokens=4_000)


class FakeSummarizer:
    """A StreamFn that records its context and answers with a fixed summary (or fails)."""

    def __init__(self, reply: str = "## Goal\nShip it", fail: str | None = None) -> None:
        self.reply = reply
        self.fail = fail
        self.contexts: list[Context] = []
        self.options: list[StreamOptions | None] = []

    async def __call__(
        self, model: Model, context: Context, options: StreamOptions | None
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.contexts.append(context)
        self.options.append(options)
        if self.fail:
            yield ErrorEvent("error", AssistantMessage(stop_reason="error", error_message=self.fail))
            return
        usage = Usage(input=900, output=40, total=940)
        yield DoneEvent("stop", AssistantMessage(content=[TextContent(self.reply)], usage=usage))


def conversation(turns: int, size: int = 400) -> list[Message]:
    """``turns`` rounds of user → assistant(tool call) → tool result → assistant text."""
    out: list[Message] = []
    for i in range(turns):
        out.append(UserMessage(f"question {i} " + "q" * size))
        out.append(AssistantMessage(content=[ToolCall(f"c{i}", "read", {"path": f"f{i}"})], stop_reason="tool_use"))
        out.append(ToolResultMessage(f"c{i}", "read", [TextContent("r" * size)]))
        out.append(AssistantMessage(content=[TextContent(f"answer {i} " + "a" * size)]))
    return out


def test_plan_keeps_recent_tokens_and_never_starts_with_a_tool_result() -> None:
    messages = conversation(10)
    for keep in range(50, 2_000, 37):
        plan = plan_compaction(messages, keep)
        assert plan.to_summarize + plan.to_keep == messages
        assert plan.first_kept_index == len(plan.to_summarize)
        if plan.to_keep:
            assert not isinstance(plan.to_keep[0], ToolResultMessage)
            assert estimate_tokens(plan.to_keep) >= min(keep, estimate_tokens(messages)) or plan.first_kept_index == 0
        kept_calls = {c.id for m in plan.to_keep if isinstance(m, AssistantMessage) for c in m.tool_calls}
        kept_results = {m.tool_call_id for m in plan.to_keep if isinstance(m, ToolResultMessage)}
        assert kept_calls == kept_results  # a call and its result are on the same side of the cut


def test_plan_with_everything_fitting_summarizes_nothing() -> None:
    plan = plan_compaction(conversation(2), 1_000_000)
    assert plan.to_summarize == [] and plan.first_kept_index == 0


def test_plan_moves_back_when_only_tool_results_follow() -> None:
    messages: list[Message] = [
        UserMessage("u" * 4_000),
        AssistantMessage(content=[ToolCall("a", "read", {}), ToolCall("b", "read", {})], stop_reason="tool_use"),
        ToolResultMessage("a", "read", [TextContent("x" * 400)]),
        ToolResultMessage("b", "read", [TextContent("y" * 400)]),
    ]
    plan = plan_compaction(messages, 50)
    assert plan.first_kept_index == 1 and isinstance(plan.to_keep[0], AssistantMessage)


def test_plan_rejects_negative_keep() -> None:
    with pytest.raises(ValueError, match="keep_recent_tokens"):
        plan_compaction([], -1)


def test_serialize_labels_and_truncates_tool_results() -> None:
    messages = conversation(1, size=5_000)
    text = serialize_transcript(messages)
    assert text.startswith("[User]: question 0")
    assert '[Assistant tool calls]: read(path="f0")' in text
    assert "[Tool result]: " in text and "r" * 5_000 not in text
    assert "[Assistant]: answer 0" in text


async def test_summarize_sends_sectioned_prompt_and_returns_text() -> None:
    fake = FakeSummarizer()
    summary = await summarize(conversation(2), fake, MODEL, previous_summary="old notes", focus="the database")
    assert summary == "## Goal\nShip it"
    context = fake.contexts[0]
    assert "Do NOT continue the conversation" in context.system_prompt
    prompt = context.messages[0]
    assert isinstance(prompt, UserMessage) and isinstance(prompt.content, str)
    for section in ("## Goal", "## Constraints & Preferences", "## Progress", "## Key Decisions", "## Next Steps"):
        assert section in prompt.content
    assert "## Critical Context" in prompt.content
    assert "<previous-summary>\nold notes" in prompt.content
    assert "Additional focus: the database" in prompt.content
    assert "<conversation>\n[User]: question 0" in prompt.content
    assert context.tools == []


async def test_summarize_failure_raises_compaction_error() -> None:
    with pytest.raises(CompactionError, match="rate limited") as info:
        await summarize(conversation(1), FakeSummarizer(fail="rate limited"), MODEL)
    assert info.value.error.kind == "compaction_failure"
    with pytest.raises(CompactionError, match="empty summary"):
        await summarize(conversation(1), FakeSummarizer(reply="   "), MODEL)


async def test_compact_replaces_old_messages_with_summary() -> None:
    messages = conversation(10)
    before = copy.deepcopy(messages)
    fake = FakeSummarizer()
    outcome = await compact(messages, fake, MODEL, keep_recent_tokens=500, trigger="overflow_recovery")
    assert outcome is not None
    assert messages == before  # input untouched
    first = outcome.messages[0]
    assert isinstance(first, UserMessage) and first.content == SUMMARY_PREFIX + "## Goal\nShip it"
    result, cut = outcome.record, outcome.first_kept_index
    assert outcome.messages[1:] == messages[cut:]
    assert result.trigger == "overflow_recovery" and result.model == "m" and result.provider == "prov"
    assert result.tokens_before == estimate_tokens(messages) > result.tokens_after == estimate_tokens(outcome.messages)
    assert result.summarization_input_tokens == 900 and result.summarization_output_tokens == 40
    assert outcome.messages_summarized == cut > 0 and result.metadata == {"messages_summarized": cut}
    assert result.turns_summarized == sum(1 for m in messages[:cut] if isinstance(m, UserMessage))
    opts = fake.options[0]
    assert opts is not None and opts.max_tokens == 4_000  # 0.8 x 16384 capped by the model's max output


async def test_compact_with_nothing_old_returns_none() -> None:
    fake = FakeSummarizer()
    assert await compact(conversation(1), fake, MODEL, keep_recent_tokens=100_000) is None
    assert fake.contexts == []


def test_truncate_tool_results_returns_new_list_without_mutating() -> None:
    messages = conversation(2, size=30_000)
    before = copy.deepcopy(messages)
    out = truncate_tool_results(messages, 20_000)
    assert messages == before and out is not messages
    results = [m for m in out if isinstance(m, ToolResultMessage)]
    assert all(len(r.text) < 20_300 and "truncated" in r.text for r in results)
    assert all(r.details is not None and int(str(r.details["truncated_chars"])) > 9_000 for r in results)
    assert [type(m) for m in out] == [type(m) for m in messages]
    assert out[0] is messages[0]


def test_overflow_error_is_level_three() -> None:
    error = overflow_error(MODEL, 150_000, "prompt is too long")
    assert error.kind == "context_overflow" and not error.retryable
    assert "150000" in error.message and "prov/m" in error.message and "new session" in error.message


@pytest.mark.parametrize(
    ("compacted", "truncated", "said"),
    [
        (True, True, " even after compaction and truncating tool results."),
        (True, False, " even after compaction (no tool result was long enough to truncate)."),
        (False, True, " even after truncating tool results (nothing was old enough to summarise)."),
        (
            False,
            False,
            "; nothing could be made smaller (nothing was old enough to summarise, no tool result long enough to "
            "truncate).",
        ),
    ],
)
def test_overflow_error_says_what_was_tried(compacted: bool, truncated: bool, said: str) -> None:
    error = overflow_error(MODEL, 150_000, None, compacted=compacted, truncated=truncated)
    window = MODEL.context_window
    assert error.message.startswith(
        "The conversation (about 150000 tokens with the system prompt and tools) does not fit the context window"
        f" of prov/m ({window} tokens){said} "
    )


def test_overflow_of_a_conversation_far_below_the_window_points_at_the_window_setting() -> None:
    tiny = overflow_error(MODEL, 32, "exceeds the available context size", compacted=False, truncated=False)
    assert "server's context is probably smaller than configured" in tiny.message
    assert "new session" not in tiny.message and tiny.message.endswith(
        "Provider said: exceeds the available context size"
    )


def test_should_compact_when_prompt_eats_the_reserves() -> None:
    budget = TokenBudget(context_window=100_000, reserve_output=8_000, reserve_compaction=16_000, history=70_000)
    assert not should_compact(budget)
    budget.history = 76_001
    assert should_compact(budget)


async def test_summary_request_is_capped_to_fit_the_summarizer_window() -> None:
    tiny = Model("tiny", "prov", "test-api", context_window=8_000, max_tokens=1_000)
    fake = FakeSummarizer()
    await summarize(conversation(40, size=2_000), fake, tiny, options=StreamOptions(max_tokens=1_000))
    prompt = fake.contexts[0].messages[0]
    assert isinstance(prompt, UserMessage) and isinstance(prompt.content, str)
    assert "earlier conversation omitted" in prompt.content
    assert estimate_tokens([prompt]) < 8_000 - 1_000
    assert "answer 39" in prompt.content and "question 0 " not in prompt.content  # the newest part is kept


def _window(fake: object, limits: EngineLimits, events: list[EngineEvent] | None = None) -> ContextWindow:
    sink: list[EngineEvent] = events if events is not None else []
    budget = TokenBudget(context_window=MODEL.context_window)
    return ContextWindow.for_history(
        [],
        model=MODEL,
        stream_fn=fake,
        limits=limits,
        budget=budget,
        emit=sink.append,  # type: ignore[arg-type]
    )


async def test_overflow_recovery_walks_the_three_levels() -> None:
    # (was OverflowRecovery's test; that duplicate of ContextWindow.recover is gone)
    events: list[EngineEvent] = []
    fake = FakeSummarizer()
    window = _window(fake, EngineLimits(), events)
    messages = conversation(10, size=30_000)
    assert await window.recover(messages, None, None) is None  # level 1: compacted, retry
    first = window.payload(messages)
    assert isinstance(first[0], UserMessage) and window.compaction is not None and len(first) < len(messages)
    assert [e.type for e in events] == ["compaction_start", "compaction_end"]
    end = events[1]
    assert isinstance(end, CompactionEndEvent) and end.will_retry and end.result is window.compaction
    assert await window.recover(messages, None, None) is None  # level 2: tool results truncated, retry
    second = window.payload(messages)
    assert len(second) == len(first)
    assert any(isinstance(m, ToolResultMessage) and "truncated" in m.text for m in second)
    third = await window.recover(messages, None, "prompt is too long")
    assert isinstance(third, AgentError) and third.kind == "context_overflow" and "prompt is too long" in third.message
    window.reset()
    assert window.level == 0 and len(fake.contexts) == 1


async def test_overflow_recovery_reports_compaction_failure() -> None:
    window = _window(FakeSummarizer(fail="summariser down"), EngineLimits(keep_recent_tokens=50))
    messages = conversation(4)  # small tool results: level 2 has nothing to cut
    result = await window.recover(messages, None, None)
    assert isinstance(result, AgentError) and result.kind == "compaction_failure" and result.retryable
    assert "summariser down" in result.message


async def test_overflow_recovery_with_nothing_to_shrink_announces_nothing_and_says_so() -> None:
    events: list[EngineEvent] = []
    fake = FakeSummarizer()
    window = _window(fake, EngineLimits(), events)  # (ported from OverflowRecovery to ContextWindow.recover)
    result = await window.recover([UserMessage("hi")], None, "exceeds the available context size")
    assert isinstance(result, AgentError) and result.kind == "context_overflow"
    assert events == [] and fake.contexts == []  # no compaction was tried, so none is announced
    assert "nothing could be made smaller" in result.message and "even after" not in result.message


async def test_a_summary_larger_than_what_it_replaces_is_refused_and_the_history_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[EngineEvent] = []
    window = _window(FakeSummarizer(reply="padding " * 5_000), EngineLimits(keep_recent_tokens=50), events)
    messages = conversation(4)  # small tool results: level 2 has nothing to cut
    before = window.payload(messages)
    with caplog.at_level("WARNING", logger="nexus.engine"):
        result = await window.recover(messages, None, None)
    assert isinstance(result, AgentError) and result.kind == "compaction_failure" and result.retryable
    assert "the summary would not make the context smaller" in result.message
    assert window.summary is None and window.cut == 0 and window.compaction is None and window.compactions == []
    assert window.payload(messages) == before  # the uncompacted conversation, as it was
    end = events[-1]
    assert isinstance(end, CompactionEndEvent) and end.result is None and end.error == result.message
    assert not end.will_retry and "compaction refused" in caplog.text


async def test_a_refused_summary_lets_overflow_recovery_truncate_tool_results_next() -> None:
    window = _window(FakeSummarizer(reply="padding " * 150_000), EngineLimits(keep_recent_tokens=50))
    messages = conversation(10, size=30_000)
    assert await window.recover(messages, None, None) is None  # level 1 refused, level 2 has results to cut
    assert window.summary is None and window.truncate_chars is not None
    final = await window.recover(messages, None, "prompt is too long")
    assert isinstance(final, AgentError) and final.kind == "compaction_failure"


async def test_a_refused_summary_followed_by_a_good_one_ends_as_an_overflow_not_as_the_old_refusal() -> None:
    fake = FakeSummarizer(reply="padding " * 5_000)
    window = _window(fake, EngineLimits(keep_recent_tokens=50))
    messages = conversation(4)
    assert not await window.compact(messages, "context_limit", None)  # proactive: refused
    fake.reply = "## Goal\nShip it"
    more = [*messages, *conversation(2)]
    assert await window.recover(more, None, None) is None  # level 1: a good summary, retried
    final = await window.recover(more, None, "prompt is too long")  # still too long: nothing else to try
    assert isinstance(final, AgentError) and final.kind == "context_overflow", final
    assert "even after compaction" in final.message
