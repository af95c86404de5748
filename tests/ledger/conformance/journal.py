"""The crash journal: open turns, journaled messages and streamed replies, and recover()."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import reply, texts, tool_round, user

from conformance.common import qa_turn
from nexus.ledger import LedgerBackend, LedgerError, ToolCallRecord, TurnNotFound, TurnStateError
from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage

# --------------------------------------------------------------------------- journal and recovery


def test_conformance_open_turn_is_in_no_history_until_closed(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = qa_turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("q2")], model="m", provider="p", run_id="run-1")
    assert backend.get_turn(open_id).status == "streaming"
    assert backend.head("s").id == t1  # type: ignore[union-attr]
    assert texts(backend.history("s")) == ["U:q1", "A:a1"]
    assert [t.id for t in backend.open_turns()] == [open_id]
    with pytest.raises(TurnStateError):
        backend.fork(open_id)
    with pytest.raises(TurnStateError):
        backend.move_pointer("s", open_id)
    call = ToolCall("c9", "bash", {"command": "ls"})
    result = ToolResultMessage("c9", "bash", [TextContent("a b")])
    backend.journal_tool_call(open_id, call, result, 100, 200, spawned_session_label="worker:1")
    backend.write_turn(open_id, "s", response_messages=[*tool_round("c9", "bash", "a b"), reply("done")])
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q2", "A:call(c9)", "R:c9", "A:done"]
    calls = backend.tool_calls(open_id)
    assert [(c.call_id, c.started_at, c.completed_at, c.spawned_session_label) for c in calls] == [
        ("c9", 100, 200, "worker:1")
    ]
    assert backend.open_turns() == []
    assert backend.get_turn(open_id).run_id == "run-1"


def test_conformance_open_turn_cannot_become_a_history_by_any_door(backend: LedgerBackend) -> None:
    backend.create_session("s")
    qa_turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("q2")])
    with pytest.raises(TurnStateError, match="still open"):
        backend.history_at(open_id)  # would show a half turn (and, cached, hide its response later)
    with pytest.raises(TurnStateError, match="still open"):
        backend.create_session("x", head_turn_id=open_id)
    with pytest.raises(TurnStateError, match="still open"):
        backend.ensure_session("y", head_turn_id=open_id)
    assert {s.label for s in backend.list_sessions()} == {"s"}
    assert backend.sessions_containing(open_id) == []
    backend.write_turn(open_id, "s", response_messages=[reply("a2")])
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert texts(backend.history_at(open_id)) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert texts(backend.history(backend.create_session("x", head_turn_id=open_id).label)) == texts(
        backend.history("s")
    )


def test_conformance_recover_closes_open_turn_as_aborted_with_journal(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = qa_turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("q2")], model="m", provider="p")
    for i in range(2):
        call = ToolCall(f"c{i}", "read", {"path": f"{i}.txt"})
        backend.journal_tool_call(open_id, call, ToolResultMessage(f"c{i}", "read", [TextContent(f"r{i}")]), i, i + 1)
    assert backend.recover(force=True) == [open_id]
    turn = backend.get_turn(open_id)
    assert turn.status == "aborted" and turn.stop_reason == "aborted" and turn.tool_call_count == 2
    assert turn.error is not None and "closed by recover()" in str(turn.error["message"])
    assert backend.head("s").id == open_id  # type: ignore[union-attr]
    assert texts(backend.history("s")) == ["U:q1", "A:a1", "U:q2", "A:call(c0,c1)", "R:c0", "R:c1"]
    assert backend.timeline("s")[-1].reason == "recover"
    assert backend.recover(force=True) == []
    assert backend.get_turn(t1).has_children


def test_conformance_recover_keeps_side_branch_when_head_moved(backend: LedgerBackend) -> None:
    backend.create_session("s")
    t1 = qa_turn(backend, "s", "q1", "a1")
    open_id = backend.open_turn("s", query_messages=[user("lost")])
    backend.journal_message(open_id, reply("partial answer"))
    t2 = qa_turn(backend, "s", "q2", "a2")  # another run moved the head meanwhile
    assert backend.recover(force=True) == [open_id]
    assert backend.head("s").id == t2  # type: ignore[union-attr]
    assert backend.get_turn(open_id).status == "aborted"
    assert texts(backend.history_at(open_id)) == ["U:q1", "A:a1", "U:lost", "A:partial answer"]
    assert {c.id for c in backend.children(t1)} == {open_id, t2}


def test_conformance_tool_call_records_from_caller(backend: LedgerBackend) -> None:
    backend.create_session("s")
    rec = ToolCallRecord(
        "c1",
        "spawn",
        {"task": "x"},
        status="completed",
        started_at=5,
        completed_at=9,
        spawned_session_label="worker:abc",
    )
    t = backend.write_turn(
        None,
        "s",
        query_messages=[user("go")],
        response_messages=[*tool_round("c1", "spawn"), reply("ok")],
        tool_calls=[rec],
    )
    got = backend.tool_calls(t)
    assert [(c.call_id, c.spawned_session_label, c.started_at) for c in got] == [("c1", "worker:abc", 5)]


def test_conformance_recover_keeps_journaled_assistant_message_and_marks_unfinished_calls(
    backend: LedgerBackend,
) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")], model="m", provider="p")
    asked = tool_round("c1")[0]
    assert isinstance(asked, AssistantMessage)
    asked = AssistantMessage(
        [*asked.content, ToolCall("c2", "bash", {"command": "sleep 99"})],
        api=asked.api,
        provider=asked.provider,
        model=asked.model,
        stop_reason="tool_use",
    )
    backend.journal_message(opened, asked)
    result = ToolResultMessage("c1", "read", [TextContent("file body")])
    backend.journal_tool_call(opened, ToolCall("c1", "read", {"path": "c1.txt"}), result, 10, 20)
    assert backend.recover(force=True) == [opened]
    turn = backend.get_turn(opened)
    assert turn.status == "aborted" and backend.head("s") == turn
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:call(c1,c2)", "R:c1"]
    assert history[1:] == [asked, result]  # the journaled messages, whole; c2 never got a result
    calls = {c.call_id: (c.status, c.started_at, c.error is None) for c in backend.tool_calls(opened)}
    assert calls == {"c1": ("completed", 10, True), "c2": ("failed", asked.timestamp, False)}
    assert backend.recover(force=True) == []  # closed once


# --------------------------------------------------------------------------- streamed replies (journal_partial)


def _streaming(text: str, *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        [TextContent(text), *calls], api="openai-completions", provider="fake", model="fake-model", timestamp=5
    )


def test_conformance_journal_partial_replaces_its_entry_and_recover_closes_it_aborted(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")], model="fake-model", provider="fake")
    for words in ("Once", "Once upon", "Once upon a time"):
        backend.journal_partial(opened, 0, _streaming(words))
    assert backend.recover(force=True) == [opened]
    turn = backend.get_turn(opened)
    assert turn.status == "aborted" and turn.stop_reason == "aborted" and backend.head("s") == turn
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:Once upon a time"]  # one message: each write replaced the last
    cut = history[-1]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    assert cut.error_message is not None and "died mid-reply" in cut.error_message
    assert (cut.model, cut.provider, cut.timestamp) == ("fake-model", "fake", 5)


def test_conformance_recover_places_replies_between_tool_calls_in_order(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")], model="m", provider="p")
    call = ToolCall("c1", "read", {"path": "a.txt"})
    backend.journal_partial(opened, 0, _streaming("let me look"))  # streaming, before the call is complete
    asked = replace(_streaming("let me look", call), stop_reason="tool_use")
    backend.journal_partial(opened, 0, asked, complete=True)  # ended: kept whole, at its first position
    result = ToolResultMessage("c1", "read", [TextContent("file body")])
    backend.journal_tool_call(opened, call, result, 10, 20)
    backend.journal_partial(opened, 1, _streaming("The file s"))
    backend.journal_partial(opened, 1, _streaming("The file says", ToolCall("c2", "read", {"path": "b.txt"})))
    assert backend.recover(force=True) == [opened]
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:let me look", "R:c1", "A:The file says"]
    assert history[1] == asked and history[2] == result  # the ended reply is kept as it was
    cut = history[3]
    assert isinstance(cut, AssistantMessage) and cut.stop_reason == "aborted"
    assert [c.id for c in cut.tool_calls] == ["c2"]  # a complete call the process never ran
    calls = {c.call_id: c.status for c in backend.tool_calls(opened)}
    assert calls == {"c1": "completed", "c2": "failed"}


def test_conformance_partial_entry_keeps_its_first_position_when_replaced(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")])
    backend.journal_partial(opened, 0, _streaming("first"))
    backend.journal_message(opened, UserMessage("steer: be brief"))
    backend.journal_partial(opened, 1, _streaming("second"))
    backend.journal_partial(opened, 0, _streaming("first, finished"), complete=True)  # a late final write of slot 0
    backend.journal_partial(opened, 2, _streaming(""))  # nothing streamed yet: left out
    backend.recover(force=True)
    history = backend.history("s")
    assert texts(history) == ["U:q", "A:first, finished", "U:steer: be brief", "A:second"]
    assert [m.stop_reason for m in history if isinstance(m, AssistantMessage)] == ["stop", "aborted"]


def test_conformance_write_turn_replaces_partial_entries(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")])
    backend.journal_partial(opened, 0, _streaming("half an ans"))
    final = reply("half an answer, then the rest")
    backend.journal_partial(opened, 0, final, complete=True)
    backend.write_turn(opened, "s", response_messages=[final])
    assert texts(backend.history("s")) == ["U:q", "A:half an answer, then the rest"]
    assert [m.role for m in backend.messages(opened)] == ["user", "assistant"]
    assert backend.recover(force=True) == []
    with pytest.raises(TurnStateError, match="already closed"):
        backend.journal_partial(opened, 1, _streaming("late"))
    assert texts(backend.history("s")) == ["U:q", "A:half an answer, then the rest"]


def test_conformance_journal_partial_bad_input_is_a_clear_error(backend: LedgerBackend) -> None:
    backend.create_session("s")
    opened = backend.open_turn("s", query_messages=[user("q")])
    with pytest.raises(TurnNotFound):
        backend.journal_partial("01NOPE", 0, _streaming("x"))
    with pytest.raises(LedgerError, match="AssistantMessage"):
        backend.journal_partial(opened, 0, UserMessage("not a reply"))  # type: ignore[arg-type]
    for slot in (-1, True, "0"):
        with pytest.raises(LedgerError, match="slot"):
            backend.journal_partial(opened, slot, _streaming("x"))  # type: ignore[arg-type]
    backend.journal_partial(opened, 0, _streaming("kept"))  # nothing was stored by the bad calls
    backend.recover(force=True)
    assert texts(backend.history("s")) == ["U:q", "A:kept"]
