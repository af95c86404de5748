"""The crash journal: open turns, journaled messages and streamed replies, and recover()."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nexus.ledger import (
    JournalMessage,
    JournalReply,
    JournalToolCall,
    Ledger,
    LedgerError,
    NewSession,
    SessionQuery,
    ToolCallRecord,
    TurnNotFound,
    TurnStateError,
)
from nexus.llm import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from nexus.testing.conformance.support import (
    fork,
    has,
    open_turn,
    qa_turn,
    reply,
    texts,
    tool_round,
    user,
    write_turn,
)

# --------------------------------------------------------------------------- journal and recovery


async def test_open_turn_is_in_no_history_until_closed(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    open_id = await open_turn(ledger, "s", query_messages=[user("q2")], model="m", provider="p", run_id="run-1")
    assert (await ledger.turns.get(open_id)).status == "streaming"
    assert (await ledger.sessions.head("s")).id == t1  # type: ignore[union-attr]
    assert texts(await ledger.turns.history("s")) == ["U:q1", "A:a1"]
    assert [t.id for t in await ledger.turns.open_turns()] == [open_id]
    with pytest.raises(TurnStateError):
        await fork(ledger, open_id)
    with pytest.raises(TurnStateError):
        await ledger.sessions.move_pointer("s", open_id)
    call = ToolCall("c9", "bash", {"command": "ls"})
    result = ToolResultMessage("c9", "bash", [TextContent("a b")])
    await ledger.turns.journal([JournalToolCall(open_id, call, result, 100, 200, spawned_session_label="worker:1")])
    await write_turn(ledger, open_id, "s", response_messages=[*tool_round("c9", "bash", "a b"), reply("done")])
    assert texts(await ledger.turns.history("s")) == ["U:q1", "A:a1", "U:q2", "A:call(c9)", "R:c9", "A:done"]
    calls = await ledger.turns.tool_calls(open_id)
    assert [(c.call_id, c.started_at, c.completed_at, c.spawned_session_label) for c in calls] == [
        ("c9", 100, 200, "worker:1")
    ]
    assert await ledger.turns.open_turns() == []
    assert (await ledger.turns.get(open_id)).run_id == "run-1"


async def test_open_turn_cannot_become_a_history_by_any_door(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    await qa_turn(ledger, "s", "q1", "a1")
    open_id = await open_turn(ledger, "s", query_messages=[user("q2")])
    with pytest.raises(TurnStateError, match="still open"):
        await ledger.turns.history_at(open_id)  # would show a half turn (and, cached, hide its response later)
    with pytest.raises(TurnStateError, match="still open"):
        await ledger.sessions.create(NewSession("x", head_turn_id=open_id))
    with pytest.raises(TurnStateError, match="still open"):
        await ledger.sessions.ensure(NewSession("y", head_turn_id=open_id))
    assert {s.label for s in await ledger.sessions.list(SessionQuery())} == {"s"}
    if has(ledger, "pointer_log"):
        assert await ledger.sessions.containing(open_id) == []
    await write_turn(ledger, open_id, "s", response_messages=[reply("a2")])
    assert texts(await ledger.turns.history("s")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert texts(await ledger.turns.history_at(open_id)) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert texts(
        await ledger.turns.history((await ledger.sessions.create(NewSession("x", head_turn_id=open_id))).label)
    ) == texts(await ledger.turns.history("s"))


async def test_recover_closes_open_turn_as_aborted_with_journal(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    open_id = await open_turn(ledger, "s", query_messages=[user("q2")], model="m", provider="p")
    for i in range(2):
        call = ToolCall(f"c{i}", "read", {"path": f"{i}.txt"})
        await ledger.turns.journal(
            [JournalToolCall(open_id, call, ToolResultMessage(f"c{i}", "read", [TextContent(f"r{i}")]), i, i + 1)]
        )
    assert await ledger.turns.recover(force=True) == [open_id]
    turn = await ledger.turns.get(open_id)
    assert turn.status == "aborted" and turn.stop_reason == "aborted" and turn.tool_call_count == 2
    assert turn.error is not None and "closed when the ledger was next opened" in str(turn.error["message"])
    assert (await ledger.sessions.head("s")).id == open_id  # type: ignore[union-attr]
    assert texts(await ledger.turns.history("s")) == ["U:q1", "A:a1", "U:q2", "A:call(c0,c1)", "R:c0", "R:c1"]
    if has(ledger, "pointer_log"):
        assert (await ledger.sessions.timeline("s"))[-1].reason == "recover"
    assert await ledger.turns.recover(force=True) == []
    assert (await ledger.turns.get(t1)).has_children


async def test_recover_keeps_side_branch_when_head_moved(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    t1 = await qa_turn(ledger, "s", "q1", "a1")
    open_id = await open_turn(ledger, "s", query_messages=[user("lost")])
    await ledger.turns.journal([JournalMessage(open_id, reply("partial answer"))])
    t2 = await qa_turn(ledger, "s", "q2", "a2")  # another run moved the head meanwhile
    assert await ledger.turns.recover(force=True) == [open_id]
    assert (await ledger.sessions.head("s")).id == t2  # type: ignore[union-attr]
    assert (await ledger.turns.get(open_id)).status == "aborted"
    assert texts(await ledger.turns.history_at(open_id)) == ["U:q1", "A:a1", "U:lost", "A:partial answer"]
    if has(ledger, "tree"):
        assert {c.id for c in await ledger.turns.children(t1)} == {open_id, t2}


async def test_tool_call_records_from_caller(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    rec = ToolCallRecord(
        "c1",
        "spawn",
        {"task": "x"},
        status="completed",
        started_at=5,
        completed_at=9,
        spawned_session_label="worker:abc",
    )
    t = await write_turn(
        ledger,
        None,
        "s",
        query_messages=[user("go")],
        response_messages=[*tool_round("c1", "spawn"), reply("ok")],
        tool_calls=[rec],
    )
    got = await ledger.turns.tool_calls(t)
    assert [(c.call_id, c.spawned_session_label, c.started_at) for c in got] == [("c1", "worker:abc", 5)]


async def test_recover_keeps_journaled_assistant_message_and_marks_unfinished_calls(
    ledger: Ledger,
) -> None:
    await ledger.sessions.create(NewSession("s"))
    opened = await open_turn(ledger, "s", query_messages=[user("q")], model="m", provider="p")
    asked = tool_round("c1")[0]
    assert isinstance(asked, AssistantMessage)
    asked = AssistantMessage(
        [*asked.content, ToolCall("c2", "bash", {"command": "sleep 99"})],
        api=asked.api,
        provider=asked.provider,
        model=asked.model,
        stop_reason="tool_use",
    )
    await ledger.turns.journal([JournalMessage(opened, asked)])
    result = ToolResultMessage("c1", "read", [TextContent("file body")])
    await ledger.turns.journal([JournalToolCall(opened, ToolCall("c1", "read", {"path": "c1.txt"}), result, 10, 20)])
    assert await ledger.turns.recover(force=True) == [opened]
    turn = await ledger.turns.get(opened)
    assert turn.status == "aborted" and await ledger.sessions.head("s") == turn
    history = await ledger.turns.history("s")
    assert texts(history) == ["U:q", "A:call(c1,c2)", "R:c1"]
    assert history[1:] == [asked, result]  # the journaled messages, whole; c2 never got a result
    calls = {c.call_id: (c.status, c.started_at, c.error is None) for c in await ledger.turns.tool_calls(opened)}
    assert calls == {"c1": ("completed", 10, True), "c2": ("failed", asked.timestamp, False)}
    assert await ledger.turns.recover(force=True) == []  # closed once


# --------------------------------------------------------------------------- streamed replies (journal_partial)


def _streaming(text: str, *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        [TextContent(text), *calls], api="openai-completions", provider="fake", model="fake-model", timestamp=5
    )


async def test_journal_partial_replaces_its_entry_and_recover_closes_it_aborted(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    opened = await open_turn(ledger, "s", query_messages=[user("q")], model="fake-model", provider="fake")
    for words in ("Once", "Once upon", "Once upon a time"):
        await ledger.turns.journal([JournalReply(opened, 0, _streaming(words))])
    assert await ledger.turns.recover(force=True) == [opened]
    turn = await ledger.turns.get(opened)
    assert turn.status == "aborted" and turn.stop_reason == "aborted" and await ledger.sessions.head("s") == turn
    history = await ledger.turns.history("s")
    assert texts(history) == ["U:q", "A:Once upon a time"]  # one message: each write replaced the last
    cut = history[-1]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    assert cut.error_message is not None and "died mid-reply" in cut.error_message
    assert (cut.model, cut.provider, cut.timestamp) == ("fake-model", "fake", 5)


async def test_recover_places_replies_between_tool_calls_in_order(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    opened = await open_turn(ledger, "s", query_messages=[user("q")], model="m", provider="p")
    call = ToolCall("c1", "read", {"path": "a.txt"})
    await ledger.turns.journal(
        [JournalReply(opened, 0, _streaming("let me look"))]
    )  # streaming, before the call is complete
    asked = replace(_streaming("let me look", call), stop_reason="tool_use")
    await ledger.turns.journal(
        [JournalReply(opened, 0, asked, complete=True)]
    )  # ended: kept whole, at its first position
    result = ToolResultMessage("c1", "read", [TextContent("file body")])
    await ledger.turns.journal([JournalToolCall(opened, call, result, 10, 20)])
    await ledger.turns.journal([JournalReply(opened, 1, _streaming("The file s"))])
    await ledger.turns.journal(
        [JournalReply(opened, 1, _streaming("The file says", ToolCall("c2", "read", {"path": "b.txt"})))]
    )
    assert await ledger.turns.recover(force=True) == [opened]
    history = await ledger.turns.history("s")
    assert texts(history) == ["U:q", "A:let me look", "R:c1", "A:The file says"]
    assert history[1] == asked and history[2] == result  # the ended reply is kept as it was
    cut = history[3]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    assert [c.id for c in cut.tool_calls] == ["c2"]  # a complete call the process never ran
    calls = {c.call_id: c.status for c in await ledger.turns.tool_calls(opened)}
    assert calls == {"c1": "completed", "c2": "failed"}


async def test_partial_entry_keeps_its_first_position_when_replaced(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    opened = await open_turn(ledger, "s", query_messages=[user("q")])
    await ledger.turns.journal([JournalReply(opened, 0, _streaming("first"))])
    await ledger.turns.journal([JournalMessage(opened, UserMessage("steer: be brief"))])
    await ledger.turns.journal([JournalReply(opened, 1, _streaming("second"))])
    await ledger.turns.journal(
        [JournalReply(opened, 0, _streaming("first, finished"), complete=True)]
    )  # a late final write of slot 0
    await ledger.turns.journal([JournalReply(opened, 2, _streaming(""))])  # nothing streamed yet: left out
    await ledger.turns.recover(force=True)
    history = await ledger.turns.history("s")
    assert texts(history) == ["U:q", "A:first, finished", "U:steer: be brief", "A:second"]
    assert [m.stop_reason for m in history if isinstance(m, AssistantMessage)] == ["stop", "aborted"]


async def test_write_turn_replaces_partial_entries(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    opened = await open_turn(ledger, "s", query_messages=[user("q")])
    await ledger.turns.journal([JournalReply(opened, 0, _streaming("half an ans"))])
    final = reply("half an answer, then the rest")
    await ledger.turns.journal([JournalReply(opened, 0, final, complete=True)])
    await write_turn(ledger, opened, "s", response_messages=[final])
    assert texts(await ledger.turns.history("s")) == ["U:q", "A:half an answer, then the rest"]
    assert [m.role for m in await ledger.turns.messages(opened)] == ["user", "assistant"]
    assert await ledger.turns.recover(force=True) == []
    with pytest.raises(TurnStateError, match="already closed"):
        await ledger.turns.journal([JournalReply(opened, 1, _streaming("late"))])
    assert texts(await ledger.turns.history("s")) == ["U:q", "A:half an answer, then the rest"]


async def test_journal_partial_bad_input_is_a_clear_error(ledger: Ledger) -> None:
    await ledger.sessions.create(NewSession("s"))
    opened = await open_turn(ledger, "s", query_messages=[user("q")])
    with pytest.raises(TurnNotFound):
        await ledger.turns.journal([JournalReply("01NOPE", 0, _streaming("x"))])
    with pytest.raises(LedgerError, match="AssistantMessage"):
        await ledger.turns.journal([JournalReply(opened, 0, UserMessage("not a reply"))])  # type: ignore[arg-type]
    for slot in (-1, True, "0"):
        with pytest.raises(LedgerError, match="slot"):
            await ledger.turns.journal([JournalReply(opened, slot, _streaming("x"))])  # type: ignore[arg-type]
    await ledger.turns.journal([JournalReply(opened, 0, _streaming("kept"))])  # nothing was stored by the bad calls
    await ledger.turns.recover(force=True)
    assert texts(await ledger.turns.history("s")) == ["U:q", "A:kept"]
