"""The engine loads a session's window, not its whole ancestry (docs/ledger.md "The engine's window")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nexus.config import load_config
from nexus.engine import AgentResult, AgentSpec, EngineLimits, Runtime
from nexus.engine.assembly.budget import history_window_chars
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.engine.execution.ledger_map import history_turn_ids
from nexus.ledger import CompactionRecord, Ledger, NewSession, Turn, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, Model, TextContent, Usage, UserMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

SMALL = Model("small", "scripted", "scripted", name="small", context_window=2_000, max_tokens=200)


def _answer(i: int) -> AssistantMessage:
    return AssistantMessage([TextContent(f"a{i} " + "z" * 150)], "scripted", "scripted", "small", Usage())


def _long_session(ledger: Ledger, turns: int) -> None:
    """A never-compacted session (as an import or a bigger model leaves one): ~400 stored chars per turn."""
    run_inline(ledger.sessions.create(NewSession("main")))
    for i in range(turns):
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "main", None, query_messages=[UserMessage(f"q{i} " + "y" * 150)], response_messages=[_answer(i)]
                )
            )
        )


def _sent(scripted: ScriptedModel) -> list[list[str]]:
    """What each model call was sent (summariser calls included), as role:text lines without timestamps."""
    return [
        [f"{m.role}:{m.text if isinstance(m, AssistantMessage) else m.content}" for m in c.messages]
        for c in scripted.calls
    ]


async def _run_next(ledger: Ledger) -> tuple[ScriptedModel, list[object], AgentResult]:
    scripted = ScriptedModel([text("## Goal\nthe summary"), text("done")], model=SMALL)
    limits = EngineLimits(keep_recent_tokens=300, reserve_tokens=200)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, limits=limits, cooldowns=ProfileCooldowns())
    execution = env.start(AgentSpec(model=SMALL), "main", UserMessage("next"))  # no event header: no clock
    result = await execution.result
    assert execution.context is not None
    return scripted, list(execution.context.history), result


async def test_a_long_session_loads_its_window_and_sends_what_a_full_load_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(tmp_path / "window.db") as windowed, Ledger.open(tmp_path / "full.db") as unbounded:
        _long_session(windowed, 300)
        _long_session(unbounded, 300)
        full = await windowed.turns.history("main")
        scripted, loaded, result = await _run_next(windowed)
        assert loaded == await windowed.turns.history_at(
            loaded_head(windowed, result), max_chars=history_window_chars(SMALL)
        )
        assert 0 < len(loaded) < len(full) // 5  # two windows of 2,000 tokens (16,000 chars): 44 of 300 turns
        assert loaded == full[-len(loaded) :] and isinstance(loaded[0], UserMessage)  # whole turns, newest

        # the old full load:
        monkeypatch.setattr("nexus.engine.assembly.budget.history_window_chars", lambda model: 10**12)
        reference, everything, reference_result = await _run_next(unbounded)
        assert len(everything) == len(full)

    # the model and the summariser were sent the same, call by call: nothing older than the window mattered
    assert _sent(scripted) == _sent(reference) and len(scripted.calls) == 2
    assert result.error is None and result.reply == reference_result.reply == "done"
    assert len(result.compactions) == len(reference_result.compactions) == 1  # too long for the model: compacted
    assert result.compactions[0].summary == reference_result.compactions[0].summary


def loaded_head(ledger: Ledger, result: AgentResult) -> str:
    """The head the run started from: the parent of the turn it wrote."""
    turn = run_inline(ledger.turns.get(result.turn_id or ""))
    return turn.parent_turn_id or ""


def test_turn_owners_of_a_window_read_only_its_turns(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """history_turn_ids maps a window's messages to their turns from the newest turns, bare compactions included."""
    _long_session(ledger, 50)
    kept = [
        run_inline(ledger.turns.write(TurnWrite("main", None, query_messages=[UserMessage(f"k{i}")]))) for i in range(2)
    ]
    record = CompactionRecord("s", kept[-1], kept[0], 50, "m")
    bare = run_inline(
        ledger.turns.write(TurnWrite("main", None, compaction=record))
    )  # a compaction turn without messages
    after = [
        run_inline(ledger.turns.write(TurnWrite("main", None, query_messages=[UserMessage(f"n{i}")]))) for i in range(3)
    ]
    history = run_inline(ledger.turns.history("main"))
    assert [m.content for m in history[1:]] == ["k0", "k1", "n0", "n1", "n2"]  # type: ignore[union-attr]
    # the newest 5 turns hold only 4 messages (the bare compaction holds none): the walk goes on past them
    assert asyncio.run(history_turn_ids(ledger, "main", history)) == ["", *kept, *after]

    _long_session_more(ledger, 20)
    window = run_inline(ledger.turns.history("main", max_chars=2_000))
    owners = asyncio.run(history_turn_ids(ledger, "main", window))
    turns = run_inline(ledger.turns.path("main"))
    by_id = {t.id: t for t in turns}
    assert owners[0] == "" and bare not in owners[1:]
    assert all(by_id[o].message_count >= 1 for o in owners[1:])
    assert owners[-1] == turns[-1].id and len(set(owners[1:])) * 2 == len(window) - 1
    calls: list[int | None] = []
    real = ledger.turns.path

    async def counted(label: str, *, limit: int | None = None) -> list[Turn]:
        calls.append(limit)
        return await real(label, limit=limit)

    monkeypatch.setattr(ledger.turns, "path", counted)
    asyncio.run(history_turn_ids(ledger, "main", window))
    assert calls == [len(window) - 1]  # the newest turns only, not the whole path


def _long_session_more(ledger: Ledger, turns: int) -> None:
    for i in range(turns):
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "main", None, query_messages=[UserMessage(f"m{i} " + "y" * 150)], response_messages=[_answer(i)]
                )
            )
        )


async def test_a_manual_compaction_reads_the_window_a_run_would_load(ledger: Ledger) -> None:
    """`nexus compact` of a long never-compacted session summarises what the next run would load."""
    from nexus.engine.assembly.budget import estimate_tokens
    from nexus.engine.wiring.compact_session import compact_session

    _long_session(ledger, 300)
    window = await ledger.turns.history("main", max_chars=history_window_chars(SMALL))
    scripted = ScriptedModel([text("## Goal\nshort")], model=SMALL)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    outcome = await compact_session("main", runtime=env, model=SMALL)
    assert outcome.status == "compacted" and outcome.result is not None
    assert (
        outcome.result.tokens_before
        == estimate_tokens(window)
        < estimate_tokens(await ledger.turns.history_at(window_head(ledger)))
    )
    kept = (await ledger.turns.history("main"))[1:]
    assert kept == window[len(window) - len(kept) :]  # the kept turns are the newest of the window


def window_head(ledger: Ledger) -> str:
    """The turn before the compaction turn (the head the manual compaction read)."""
    return run_inline(ledger.turns.get(run_inline(ledger.sessions.head("main")).id)).parent_turn_id or ""  # type: ignore[union-attr]


def test_the_window_is_two_context_windows_and_an_unknown_window_bounds_nothing() -> None:
    assert history_window_chars(SMALL) == 2 * 2_000 * 4
    unknown = Model("u", "scripted", "scripted", name="u", context_window=0, max_tokens=200)
    assert history_window_chars(unknown) >= 1 << 62
