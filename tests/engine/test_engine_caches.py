"""The per-turn caches: they must never change what the model or the ledger sees, only how often work is done."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from nexus.engine.assembly import bootstrap
from nexus.engine.assembly._sessions import SessionCache, SessionStates
from nexus.engine.assembly._window import ContextWindow, history_estimates
from nexus.engine.assembly.bootstrap import load_bootstrap_files
from nexus.engine.assembly.budget import context_estimates, estimate_context_tokens
from nexus.engine.assembly.compaction import truncate_tool_results
from nexus.engine.assembly.repair import MISSING_RESULT_TEXT, repair_transcript
from nexus.engine.types import EngineLimits, TokenBudget
from nexus.llm.types import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from nexus.testing import ScriptedModel

# --------------------------------------------------------------------------- bootstrap files


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_edited_bootstrap_file_is_seen_by_the_next_load(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("first rules")
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["first rules"]
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["first rules"]  # served from the cache
    target = tmp_path / "AGENTS.md"
    target.write_text("other rules")  # same size: only the stamp tells
    _bump_mtime(target)
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["other rules"]
    target.write_text("longer rules than before")
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["longer rules than before"]


def test_added_removed_and_replaced_bootstrap_files_are_seen(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rules")
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md"]
    (tmp_path / "SOUL.md").write_text("calm")
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md", "SOUL.md"]
    (tmp_path / "AGENTS.md").unlink()
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["SOUL.md"]
    replacement = tmp_path / "new.md"
    replacement.write_text("warm")
    os.replace(replacement, tmp_path / "SOUL.md")  # a new inode, as editors that save atomically do
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["warm"]


def _settle(directory: Path, monkeypatch: Any) -> None:
    """Make ``directory`` look long unchanged: its mtime in the past, and any age counted as settled (its
    ctime, which ``utime`` sets to now, cannot be moved back)."""
    monkeypatch.setattr(bootstrap, "SETTLED_NS", 0, raising=False)
    old = directory.stat().st_mtime_ns - 60_000_000_000
    os.utime(directory, ns=(old, old))


def _stats_of(directory: Path, monkeypatch: Any) -> list[str]:
    """The paths under ``directory`` that ``os.stat`` is called on from now on."""
    seen: list[str] = []
    real = os.stat

    def counting(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).startswith(str(directory)):
            seen.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting)
    return seen


def test_a_settled_workspace_stats_only_the_names_it_holds(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "AGENTS.md").write_text("rules")
    _settle(tmp_path, monkeypatch)
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["rules"]
    stats = _stats_of(tmp_path, monkeypatch)
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["rules"]
    assert sorted(stats) == sorted([str(tmp_path), str(tmp_path / "AGENTS.md")])  # not one per name (eight)
    (tmp_path / "AGENTS.md").write_text("new rules")  # edited in place: the directory does not change
    _bump_mtime(tmp_path / "AGENTS.md")
    assert [f.content for f in load_bootstrap_files(tmp_path)] == ["new rules"]


def test_a_file_added_to_a_settled_workspace_is_seen(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "AGENTS.md").write_text("rules")
    os.symlink(tmp_path / "elsewhere.md", tmp_path / "USER.md")  # dangling: an entry, not yet a file
    _settle(tmp_path, monkeypatch)
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md"]
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md"]  # served from the cache
    (tmp_path / "SOUL.md").write_text("calm")  # a new name moves the directory's mtime
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md", "SOUL.md"]
    _settle(tmp_path, monkeypatch)
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md", "SOUL.md"]
    old = (tmp_path / "SOUL.md").stat().st_mtime_ns
    (tmp_path / "elsewhere.md").write_text("me")  # the symlink's target appears (outside the cached names)
    os.utime(tmp_path, ns=(old, old - 60_000_000_000))  # and the workspace looks untouched again
    assert [f.name for f in load_bootstrap_files(tmp_path)] == ["AGENTS.md", "SOUL.md", "USER.md"]


def test_a_workspace_changed_just_now_is_stat_ed_in_full(tmp_path: Path, monkeypatch: Any) -> None:
    """Its mtime may not move for a file created in the same clock tick: every name is looked up."""
    (tmp_path / "AGENTS.md").write_text("rules")
    load_bootstrap_files(tmp_path)
    stats = _stats_of(tmp_path, monkeypatch)
    load_bootstrap_files(tmp_path)
    assert {str(tmp_path / name) for name in bootstrap.BOOTSTRAP_FILES} <= set(stats)


def test_cached_bootstrap_list_is_a_copy_and_caps_are_part_of_the_key(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 300)
    first = load_bootstrap_files(tmp_path)
    first.clear()  # a caller changing its list must not change the next caller's
    assert len(load_bootstrap_files(tmp_path)) == 1
    small = load_bootstrap_files(tmp_path, max_file_chars=100)
    assert small[0].truncated and small[0].content.startswith("x" * 100)
    assert not load_bootstrap_files(tmp_path)[0].truncated


# --------------------------------------------------------------------------- payload repair


def call(id: str) -> ToolCall:
    return ToolCall(id, "read", {"path": f"{id}.txt"})


def result(id: str, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(id, "read", [TextContent(text)])


def asst(*calls: ToolCall, text: str = "") -> AssistantMessage:
    content: list[Any] = [TextContent(text)] if text else []
    return AssistantMessage(content=[*content, *calls], stop_reason="tool_use" if calls else "stop")


def window(limits: EngineLimits = EngineLimits(), cache: SessionCache | None = None) -> ContextWindow:
    model = ScriptedModel().model
    return ContextWindow.for_history(
        [],
        model=model,
        stream_fn=ScriptedModel().stream,
        limits=limits,
        budget=TokenBudget(100_000),
        emit=print,
        cache=cache,
    )


def reference(messages: list[Message], limits: EngineLimits = EngineLimits()) -> list[Message]:
    """The payload as computed from scratch (what the cached path must always equal)."""
    return truncate_tool_results(repair_transcript(messages), limits.max_tool_result_chars)


def test_payload_grows_incrementally_and_equals_a_full_repair_every_time() -> None:
    win = window()
    conversation: list[Message] = [UserMessage("q1"), asst(call("a")), UserMessage("steer")]  # orphan call "a"
    snapshot = copy.deepcopy(conversation)
    steps: list[Message] = [
        asst(call("b"), call("c")),
        result("c"),
        result("b"),
        asst(text="done"),
        UserMessage("q2"),
        asst(call("d")),
    ]
    payload = win.payload(conversation)
    assert payload == reference(conversation)
    for message in steps:
        conversation.append(message)
        payload = win.payload(conversation)
        assert payload == reference(conversation)
    synthetic = [m for m in payload if isinstance(m, ToolResultMessage) and m.is_error]
    assert [m.tool_call_id for m in synthetic] == ["a", "d"]  # orphans early and late both get a result
    assert synthetic[0].content[0].text == MISSING_RESULT_TEXT  # type: ignore[union-attr]
    assert conversation[:3] == snapshot  # stored messages are never touched


def test_payload_is_recomputed_when_an_earlier_message_changes() -> None:
    win = window()
    conversation: list[Message] = [UserMessage("q"), asst(call("a")), result("a"), asst(call("b")), result("b")]
    assert win.payload(conversation) == reference(conversation)
    conversation[2] = result("zzz")  # the result of "a" replaced: "a" is now an orphan, "zzz" a stray
    conversation.append(asst(text="end"))
    payload = win.payload(conversation)
    assert payload == reference(conversation)
    assert [m.tool_call_id for m in payload if isinstance(m, ToolResultMessage)] == ["a", "b"]
    assert next(m for m in payload if isinstance(m, ToolResultMessage)).is_error


def test_payload_follows_a_popped_tail_and_a_new_result_cap() -> None:
    conversation: list[Message] = [UserMessage("q"), asst(call("a")), result("a", "y" * 500), asst(text="x")]
    win = window()
    assert win.payload(conversation) == reference(conversation)
    conversation.pop()
    conversation.append(asst(call("b")))
    assert win.payload(conversation) == reference(conversation)
    capped = EngineLimits(max_tool_result_chars=100)
    small = window(capped)
    payload = small.payload(conversation)
    assert payload == reference(conversation, capped)
    assert "truncated" in payload[2].content[0].text  # type: ignore[union-attr]


def test_a_later_run_reuses_the_prefix_only_for_the_same_messages() -> None:
    history: list[Message] = [UserMessage("q1"), asst(call("a")), result("a"), asst(text="a done")]
    cache = SessionCache()
    first = window(cache=cache)
    first.payload([*history, UserMessage("q2")])
    assert cache.prefix is not None and cache.prefix[1] == history[:3]  # up to the last assistant message
    later = window(cache=cache)  # a new run of the same session: same history objects
    turn = [*history, UserMessage("q2"), asst(call("b"))]
    assert later.payload(turn) == reference(turn)
    other: list[Message] = [UserMessage("q1"), asst(call("a")), UserMessage("no result"), asst(text="a done")]
    q2 = UserMessage("q2")  # one object: two would differ in their timestamps when a millisecond passes
    assert window(cache=cache).payload([*other, q2]) == reference([*other, q2])


# --------------------------------------------------------------------------- token estimates


def test_history_estimates_match_the_budget_rules_as_a_session_grows() -> None:
    answered = AssistantMessage([TextContent("x" * 400)], usage=Usage(input=500, output=100))
    history: list[Message] = [UserMessage("a" * 40), answered, UserMessage("b" * 80)]
    assert context_estimates(history) == (620, [None, None, 20])  # usage covers the first two
    cache = SessionCache()
    assert history_estimates(history, cache) == context_estimates(history)
    grown = [*history, AssistantMessage([TextContent("y" * 40)]), UserMessage("c" * 8)]  # no usage in the new turn
    assert history_estimates(grown, cache) == context_estimates(grown) == (600 + 20 + 10 + 2, [None, None, 20, 10, 2])
    newer = AssistantMessage([TextContent("z" * 4)], usage=Usage(input=900, output=1))
    latest = [*grown, newer, UserMessage("d" * 4)]
    assert history_estimates(latest, cache) == context_estimates(latest) == (901 + 1, [None] * 6 + [1])
    edited = [UserMessage("e" * 400), *latest[1:]]  # an earlier message differs: not served from before
    assert history_estimates(edited, cache) == context_estimates(edited)
    no_usage: list[Message] = [UserMessage("f" * 40), AssistantMessage([TextContent("g" * 80)])]
    assert history_estimates(no_usage, cache) == context_estimates(no_usage) == (30, [10, 20])
    changed = list(no_usage)
    no_usage.append(UserMessage("h" * 4))  # the caller's list changing later does not change what was kept
    assert history_estimates(changed, cache) == (30, [10, 20])


def test_window_uses_assembly_estimates_only_for_a_history_of_their_length() -> None:
    model = ScriptedModel().model
    history: list[Message] = [UserMessage("a" * 40), AssistantMessage([TextContent("e" * 80)])]

    def fresh(estimates: list[int | None] | None) -> ContextWindow:
        return ContextWindow.for_history(
            history, model=model, stream_fn=ScriptedModel().stream, limits=EngineLimits(), budget=TokenBudget(1000),
            emit=print, estimates=estimates,
        )  # fmt: skip

    assert fresh([999, 999]).tokens(history) == 1998  # deliberately wrong numbers: trusted as assembly's
    assert fresh(None).tokens(history) == 30
    assert fresh([999]).tokens(history) == 30  # not for this history


def test_many_sessions_keep_their_caches_within_the_byte_budget() -> None:
    # the old module-level caches held 16/32 entries: the 17th live session thrashed them
    states = SessionStates(max_bytes=1_000_000)
    histories = {f"s{i}": [UserMessage(f"q{i}" * 10), AssistantMessage([TextContent("a" * 40)])] for i in range(200)}
    for label, history in histories.items():
        history_estimates(history, states.get(label))
    assert len(states) == 200 and states.nbytes <= 1_000_000
    cache = states.get("s0")
    assert cache.estimates is not None and cache.estimates.messages == histories["s0"]
    small = SessionStates(max_bytes=2_000)
    for label, history in histories.items():
        history_estimates(history, small.get(label))
    assert small.nbytes <= 2_000 and 0 < len(small) < 200  # least recently used evicted
    assert small.get("s199").estimates is not None


def test_window_tokens_find_usage_that_appears_after_a_scan_found_none() -> None:
    win = window()
    conversation: list[Message] = [UserMessage("a" * 40), AssistantMessage([TextContent("e" * 80)])]
    assert win.tokens(conversation) == estimate_context_tokens(conversation) == 30
    conversation.append(AssistantMessage([TextContent("x" * 4)], usage=Usage(input=700, output=5)))
    conversation.append(UserMessage("b" * 8))
    assert win.tokens(conversation) == estimate_context_tokens(conversation) == 705 + 2
    conversation[1] = AssistantMessage([TextContent("e" * 8)], usage=Usage(input=50, output=1))  # replaced
    del conversation[2:]
    assert win.tokens(conversation) == estimate_context_tokens(conversation) == 51
