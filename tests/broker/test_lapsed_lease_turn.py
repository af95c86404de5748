"""A broker whose run lost the session's lease, then took the lease again itself, closes that run's turn first.

The fault test at load 13-19 (``tests/broker/test_serve_faults.py``, "a turn off the chain"): a run opened
its turn (status ``streaming``), its lease renewals found the database busy until the lease expired, and
the run was aborted; its final write was refused by the lease fence, so the turn stayed open. Nobody else
had taken the session, so the same broker acquired it again: a new epoch, but no prior holder, so no
takeover and no recovery. Its next run forked from the head beside the open turn, and a later takeover's
recovery closed that turn as a side branch. Real SQLite ledger with leases on, real engine, the scripted
model; the lease is made to lapse mid-run by moving its expiry into the past.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nexus.broker import AgentBroker, AgentIdentity, AgentMessage, BrokerSettings, QueueSettings
from nexus.config import load_config
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.llm import Context
from nexus.testing import ScriptedModel
from nexus.testing.steps import Step, from_context, stall, text


async def test_a_run_cut_by_its_own_lapsed_lease_leaves_its_turn_closed_on_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"

    def lapse(context: Context) -> Step:
        """Mid-run, the turn open: the lease expires as if no renewal had got through (the database busy)."""
        del context
        with sqlite3.connect(path, timeout=10) as conn:
            conn.execute("UPDATE session_leases SET expires_at = 0 WHERE session_label = 'agent:w'")
        return stall(after_chunks=1, seconds=20)  # the renewal finds it lost and aborts the run

    with Ledger.open(path) as ledger:
        scripted = ScriptedModel([from_context(lapse), text("done")])
        runtime = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        settings = BrokerSettings(queue=QueueSettings(mode="followup"), leases=True, lease_ttl_ms=900)
        broker = AgentBroker(ledger, runtime, settings)
        await broker.start()
        await ledger.sessions.ensure(NewSession("agent:w"))
        broker.register_agent(AgentIdentity("w", "agent:w"), spec=AgentSpec(model=scripted.model.ref))
        try:
            result = await broker.send_and_wait(AgentMessage("m-1", "user", "w", "go"), timeout_ms=60_000)
        finally:
            await broker.close()
        assert result.success and result.reply == "done"
        assert await ledger.turns.open_turns("agent:w") == []  # the cut run's turn was closed before the rerun
        assert await ledger.turns.recover(force=True, session="agent:w") == []  # a later takeover: nothing left
        rows = await ledger.database.run_read(
            lambda c: c.execute(
                "SELECT id, parent_turn_id, status FROM turns WHERE session_label = 'agent:w' ORDER BY id"
            ).fetchall()
        )
    (cut_id, cut_parent, cut_status), (done_id, done_parent, done_status) = rows
    assert (cut_parent, cut_status) == (None, "aborted")
    assert (done_id, done_parent, done_status) == (result.turn_id, cut_id, "completed")  # one chain, no fork
