"""One run per session at a time across processes (DESIGN §4.3): the session lock and run_agent."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.config import load_config
from nexus.engine import run_agent
from nexus.engine.execution.session_lock import session_lock, session_lock_path
from nexus.ledger import Ledger, NewSession, TurnDetails, TurnWrite
from nexus.llm.abort import AbortSignal
from nexus.llm.types import UserMessage
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
open(sys.argv[3], "w").close()  # the marker is written before the lock is let go
fcntl.flock(fd, fcntl.LOCK_UN)
time.sleep(5)
"""


def test_lock_path_is_per_session_and_safe_for_any_label(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    a, b = session_lock_path(db, "main"), session_lock_path(db, "main/worker-1")
    assert a != b and a.parent == b.parent == tmp_path / "locks"
    assert "/" not in a.name and session_lock_path(db, "main") == a


def test_every_name_of_one_database_has_the_same_session_locks(tmp_path: Path) -> None:
    """A symlinked ``agents.db`` (or home) is the same database: its runs must wait on the same lock."""
    (tmp_path / "h1").mkdir()
    (tmp_path / "h2").mkdir()
    (tmp_path / "h1" / "agents.db").touch()
    (tmp_path / "h2" / "agents.db").symlink_to(tmp_path / "h1" / "agents.db")
    (tmp_path / "h3").symlink_to(tmp_path / "h1", target_is_directory=True)
    first = session_lock_path(tmp_path / "h1" / "agents.db", "main")
    assert first.parent == (tmp_path / "h1" / "locks").resolve()
    for other in ("h2", "h3"):
        assert session_lock_path(tmp_path / other / "agents.db", "main") == first


async def test_second_holder_waits_for_another_process(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    path = session_lock_path(db, "main")
    path.parent.mkdir(parents=True)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, str(path), "0.5", str(tmp_path / "released"), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and (await holder.stdout.readline()).strip() == b"held"
        waited: list[bool] = []
        async with session_lock(db, "main", on_wait=lambda: waited.append(True)) as held:
            assert held and waited == [True]
            assert (tmp_path / "released").exists(), "granted only after the other process let go"
        async with session_lock(db, "other") as held:  # other sessions never wait
            assert held
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()


async def test_abort_stops_the_wait_without_the_lock(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    signal = AbortSignal()
    async with session_lock(db, "main") as first:
        assert first
        asyncio.get_running_loop().call_later(0.1, signal.abort)
        async with session_lock(db, "main", signal=signal) as second:
            assert second is False
    async with session_lock(db, "main") as again:  # released by both blocks
        assert again


async def test_run_agent_waits_for_the_session_then_continues_it(isolated_env: Path) -> None:
    scripted = ScriptedModel([text("second")])
    config = load_config()
    with Ledger.open(config.database_path) as ledger:
        await ledger.sessions.ensure(NewSession("main"))
        async with session_lock(ledger.path, "main"):
            task = asyncio.create_task(
                run_agent("two", config=config, ledger=ledger, model=scripted.model, stream_fn=scripted.stream)
            )
            await asyncio.sleep(0.2)
            assert not task.done() and scripted.calls == [], "the run waits while the session is busy"
            # meanwhile "another run" finishes a turn: the waiting run must build on it
            first = await ledger.turns.write(
                TurnWrite(
                    "main", None, query_messages=[UserMessage("one")], details=TurnDetails(model="m", provider="p")
                )
            )
        result = await task
        assert result.stop_reason == "end_turn"
        [call] = scripted.calls
        assert any(isinstance(m, UserMessage) and m.content == "one" for m in call.messages)
        head = await ledger.sessions.head("main")
        assert head is not None and head.parent_turn_id == first, "no fork: the second turn follows the first"


async def test_run_agent_aborted_while_waiting_stores_nothing(isolated_env: Path) -> None:
    scripted = ScriptedModel([text("never")])
    config = load_config()
    signal = AbortSignal()
    with Ledger.open(config.database_path) as ledger:
        await ledger.sessions.ensure(NewSession("main"))
        async with session_lock(ledger.path, "main"):
            asyncio.get_running_loop().call_later(0.1, signal.abort)
            result = await run_agent(
                "hello", config=config, ledger=ledger, model=scripted.model, stream_fn=scripted.stream, signal=signal
            )
        assert result.stop_reason == "aborted" and result.error is not None
        assert "waiting for another run" in result.error.message
        assert result.messages[0].text == "hello"
        assert scripted.calls == [] and await ledger.turns.path("main") == [] and await ledger.turns.open_turns() == []


@pytest.mark.parametrize("label", ["main"])
def test_lock_file_is_created_next_to_the_ledger(tmp_path: Path, label: str) -> None:
    async def hold() -> None:
        async with session_lock(tmp_path / "agents.db", label):
            assert session_lock_path(tmp_path / "agents.db", label).exists()

    asyncio.run(hold())


SRC = str(Path(__file__).resolve().parents[2] / "src")

RUN_HOLDER = """
import fcntl, os, sys, time
from nexus.engine.execution.session_lock import session_lock_path
from nexus.ledger import JournalReply, Ledger, TurnDetails, TurnOpen
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, UserMessage
db = sys.argv[1]
path = session_lock_path(__import__("pathlib").Path(db), "main")
path.parent.mkdir(parents=True, exist_ok=True)
fd = os.open(path, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
ledger = Ledger.open(db)
opening = TurnOpen("main", [UserMessage("the killed run's message")], TurnDetails(model="m", provider="p"))
turn = run_inline(ledger.turns.open(opening))
reply = AssistantMessage([TextContent("half a reply")], model="m", provider="p")
run_inline(ledger.turns.journal([JournalReply(turn, 0, reply)]))
print(turn, flush=True)
time.sleep(60)
"""


async def test_run_agent_after_a_killed_holder_continues_from_its_recovered_turn(isolated_env: Path) -> None:
    """Issue 8 item 1 at the library door: the waiter recovers the holder's turn before reading the head."""
    scripted = ScriptedModel([text("after the kill")])
    config = load_config()
    with Ledger.open(config.database_path) as ledger:
        await ledger.sessions.ensure(NewSession("main"))
        first = await ledger.turns.write(
            TurnWrite("main", None, query_messages=[UserMessage("one")], details=TurnDetails(model="m", provider="p"))
        )
        holder = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            RUN_HOLDER,
            str(config.database_path),
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": SRC},
        )
        try:
            assert holder.stdout is not None
            killed_turn = (await holder.stdout.readline()).decode().strip()
            assert killed_turn, "the holder opened its turn"
            task = asyncio.create_task(
                run_agent("two", config=config, ledger=ledger, model=scripted.model, stream_fn=scripted.stream)
            )
            await asyncio.sleep(0.2)
            assert not task.done(), "the run waits for the holder"
            holder.kill()  # SIGKILL; left unreaped (a zombie) until the run is done
            result = await task
        finally:
            if holder.returncode is None:
                holder.kill()
            await holder.wait()
        assert result.stop_reason == "end_turn"
        turns = await ledger.turns.path("main")
        assert [t.id for t in turns[:2]] == [first, killed_turn]
        assert turns[1].status == "aborted" and turns[2].parent_turn_id == killed_turn
        [call] = scripted.calls
        sent = [str(m.content) if isinstance(m, UserMessage) else "" for m in call.messages]
        assert any("the killed run's message" in s for s in sent), "the model saw the killed run's message"


async def test_a_removed_locks_directory_is_made_again(tmp_path: Path) -> None:
    """The directory is made on first use only; one removed while the process runs is made again."""
    db = tmp_path / "agents.db"
    async with session_lock(db, "main") as held:
        assert held
    shutil.rmtree(tmp_path / "locks")
    async with session_lock(db, "main") as held:
        assert held and session_lock_path(db, "main").exists()


async def test_a_wait_cancelled_or_a_block_that_raises_leaves_no_descriptor_open(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    fds = len(os.listdir("/proc/self/fd"))
    async with session_lock(db, "main"):

        async def second() -> None:
            async with session_lock(db, "main"):
                raise AssertionError("never granted while the first block holds it")

        waiting = asyncio.create_task(second())
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    with pytest.raises(ValueError, match="inside"):
        async with session_lock(db, "main"):
            raise ValueError("inside")
    assert len(os.listdir("/proc/self/fd")) == fds
    async with session_lock(db, "main") as held:  # and the lock is free again
        assert held


async def test_a_runtime_that_ran_the_session_still_recovers_a_turn_another_process_left_open(
    isolated_env: Path, sql_trace: Callable[[Ledger], list[str]]
) -> None:
    """The lock's open-turn check is skipped while no other process committed (the ledger's ``others_mark``);
    a killed process's open turn is such a commit, so the next run still recovers it before reading the head."""
    from nexus.engine import AgentSpec, Runtime
    from nexus.engine.execution.cooldowns import ProfileCooldowns

    scripted = ScriptedModel([text("first"), text("second"), text("after the kill")])
    config = load_config()
    with Ledger.open(config.database_path) as ledger:
        env = Runtime(config, ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        spec = AgentSpec(model=scripted.model.ref)
        await env.run(spec, "main", "one")
        statements = sql_trace(ledger)
        second = await env.run(spec, "main", "two")
        assert not [s for s in statements if "FROM turns WHERE status" in s]  # nobody else wrote: not read
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", RUN_HOLDER, str(config.database_path), stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": SRC},
        )  # fmt: skip
        try:
            assert holder.stdout is not None
            killed_turn = (await holder.stdout.readline()).decode().strip()
            assert killed_turn, "the holder opened its turn"
            holder.kill()
            await holder.wait()
            third = await env.run(spec, "main", "three")
        finally:
            if holder.returncode is None:
                holder.kill()
                await holder.wait()
        turns = await ledger.turns.path("main")
        assert [t.id for t in turns] == [turns[0].id, second.turn_id, killed_turn, third.turn_id]
        assert turns[2].status == "aborted"
        assert "the killed run's message" in str(scripted.calls[-1].messages)


async def test_a_waiter_gets_the_lock_between_the_runs_of_a_busy_holder(tmp_path: Path) -> None:
    """``flock`` is not fair: a broker working through a backlog takes the session again the moment it lets go,
    and a ``nexus run`` polling every 50 ms waited for the whole backlog (a stranger's trial: ~100 s behind 19
    queued messages). The waiter now goes ahead at the holder's next take."""
    db = tmp_path / "agents.db"
    taken: list[str] = []

    async def busy_holder() -> None:  # 40 runs back to back, as a broker draining a backlog
        for n in range(40):
            async with session_lock(db, "main") as held:
                assert held
                taken.append(f"holder {n}")
                await asyncio.sleep(0.02)

    holder = asyncio.create_task(busy_holder())
    await asyncio.sleep(0.01)
    waited: list[bool] = []
    async with session_lock(db, "main", on_wait=lambda: waited.append(True)) as held:
        assert held and waited == [True]
        taken.append("waiter")
    await holder
    assert len(taken) == 41
    assert taken.index("waiter") < 20, taken  # it came last, after all 40
    assert not list((tmp_path / "locks").glob("*.waiting")), "the holder removes the mark nobody holds any more"


async def test_a_waiting_mark_nobody_holds_is_removed_and_not_waited_for(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    path = session_lock_path(db, "main")
    path.parent.mkdir(parents=True)
    mark = path.with_name(path.name + ".waiting")
    mark.touch()  # left by a waiter that was killed
    async with session_lock(db, "main") as held:
        assert held
    assert not mark.exists()
