"""A run's session reads: a label seen before is not looked up again at the start, and assembly reads the
label, head and history window in one transaction. Sessions are never deleted or renamed, so this changes
no answer: a new name still creates its session, an alias still resolves, the history is the ledger's.
Real SQLite; the statements are the ledger connection's."""

from __future__ import annotations

from collections.abc import Callable

from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import text


def _runtime(ledger: Ledger, replies: int) -> tuple[Runtime, AgentSpec]:
    scripted = ScriptedModel([text(f"reply {n}") for n in range(replies)])
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    return env, AgentSpec(model=scripted.model.ref)


def _session_row_reads(statements: list[str]) -> int:
    return len([s for s in statements if "FROM sessions" in s and "SELECT label" in s])


async def test_a_known_label_is_read_once_a_run_and_the_history_is_the_ledgers(
    sql_trace: Callable[[Ledger], list[str]], ledger: Ledger
) -> None:
    env, spec = _runtime(ledger, 3)
    first = await env.run(spec, "s", "one")
    statements = sql_trace(ledger)
    second = await env.run(spec, "s", "two")
    assert _session_row_reads(statements) == 0  # no ensure at the start, none in assembly
    assert len([s for s in statements if s == "BEGIN"]) == 1  # assembly's one read (the lock's check: see
    # test_session_lock.py, it reads only after another process committed)
    assert second.turn_id is not None and first.turn_id is not None
    head = await ledger.sessions.head("s")
    assert head is not None and head.id == second.turn_id and head.parent_turn_id == first.turn_id
    history = await ledger.turns.history("s")
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]


async def test_new_names_are_created_and_aliases_resolve(ledger: Ledger) -> None:
    env, spec = _runtime(ledger, 3)
    await env.run(spec, "fresh", "hello")  # unknown: created at the start
    assert (await ledger.sessions.get("fresh")).thread_id is not None
    await ledger.sessions.add_alias("phone:+1555", "fresh", reason="identity_promotion")
    by_alias = await env.run(spec, "phone:+1555", "again")
    assert by_alias.turn_id is not None
    assert (await ledger.sessions.get("fresh")).thread_id == by_alias.turn_id  # the alias's session went on
    assert [m.role for m in await ledger.turns.history("fresh")] == ["user", "assistant"] * 2
