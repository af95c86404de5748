"""The broker's smart routing on the real engine: route_smart, fork_from, routing modes, send_routed."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.broker import AgentIdentity, AgentMessage
from nexus.broker.host import running_broker
from nexus.config import load_config
from nexus.engine import AgentSpec
from nexus.ledger import Ledger
from nexus.routing import RoutingError
from nexus.testing import ScriptedModel
from nexus.testing.steps import text

PAST = [
    (
        "Add rate limiting to the login endpoint",
        "Added a sliding window rate limiter to POST /login in auth/ratelimit.py",
    ),
    ("Shrink the API docker image", "Docker image is now a multi-stage build, 240 MB"),
    ("Generate a PDF invoice when an order is paid", "billing/invoice_pdf.py renders invoices with WeasyPrint"),
    ("Alert when the API error rate is above 2 percent", "A Prometheus rule pages on-call at 2 % of 5xx"),
    ("Make product search tolerate typos", "Elasticsearch fuzziness AUTO on the product query"),
]


async def _coder(broker: object, scripted: ScriptedModel) -> None:
    """Agent ``coder`` with the past work above, one conversation (``task:N``) each."""
    broker.register_agent(AgentIdentity("coder", "agent:coder", "worker"), spec=AgentSpec(model=scripted.model.ref))  # type: ignore[attr-defined]
    for i, (content, _) in enumerate(PAST):
        message = AgentMessage(id=f"m{i}", from_="user", to="coder", content=content, session=f"task:{i}")
        assert (await broker.send_and_wait(message)).success  # type: ignore[attr-defined]


def _model(*more: str) -> ScriptedModel:
    return ScriptedModel([*(text(reply) for _, reply in PAST), *(text(m) for m in more)])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_route_then_fork_runs_the_task_in_a_fork_of_the_checkpoint(
    isolated_env: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        with Ledger.open(isolated_env / "agents.db") as ledger:
            await _route_then_fork(ledger)
        return
    ledger = await Ledger.connect(request.getfixturevalue("postgres_url"))
    try:
        await _route_then_fork(ledger)
    finally:
        await ledger.aclose()


async def _route_then_fork(ledger: Ledger) -> None:
    scripted = _model("The limiter now answers 429 with a JSON body", "again")
    async with running_broker(load_config(), ledger, stream_fn=scripted.stream) as host:
        broker = host.broker
        await _coder(broker, scripted)
        decision = await broker.route_smart("the login rate limiter should answer 429 with a JSON body")
        assert decision.mode == "existing" and decision.checkpoint is not None
        assert decision.checkpoint.agent_id == "coder" and decision.checkpoint.session_key == "coder~task~0"
        assert decision.checkpoint.context.startswith("Add rate limiting to the login endpoint — Added")
        message = AgentMessage(id="m-fork", from_="user", to="someone-else", content="the 429 body, please")
        receipt = await broker.fork_from(decision.checkpoint, message)
        again = await broker.fork_from(decision.checkpoint, message)  # a retry: same fork, not queued twice
        assert not receipt.duplicate and again.duplicate
        await broker.wait_until_idle()
    fork = await ledger.sessions.get("coder~fork~m-fork")
    assert fork.origin == "fork" and fork.routing_key == "fork:m-fork"
    turns = await ledger.turns.path("coder~fork~m-fork")
    assert [t.id for t in turns[:-1]] == [decision.checkpoint.turn_id]  # the checkpoint's path, shared
    assert turns[-1].session_label == "coder~fork~m-fork" and turns[-1].status == "completed"
    assert (await ledger.turns.path("coder~task~0"))[-1].id == decision.checkpoint.turn_id  # the original stays
    assert len(await ledger.sessions.containing(decision.checkpoint.turn_id)) == 2  # nothing copied
    assert scripted.pending == 1  # the retried fork_from ran nothing


@pytest.mark.parametrize(("route", "task", "expect"), [
    ("smart", "the login rate limiter should answer 429 with a JSON body", "fork"),
    ("smart", "write a haiku about autumn leaves", "new"),
    ("hybrid", "write a haiku about autumn leaves", "explicit"),
    ("explicit", "the login rate limiter should answer 429 with a JSON body", "explicit"),
])  # fmt: skip
async def test_send_routed_follows_the_mode(isolated_env: Path, route: str, task: str, expect: str) -> None:
    scripted = _model("ok")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        async with running_broker(load_config(), ledger, stream_fn=scripted.stream) as host:
            broker = host.broker
            await _coder(broker, scripted)
            routed = await broker.send_routed(
                AgentMessage(id="r1", from_="user", to="coder", content=task), route=route
            )
            await broker.wait_until_idle()
            (decision,) = [d for d in broker.routing.router.decisions.decisions() if d.message_id == "r1"]
        session = {"fork": "fork:r1", "new": "new:r1", "explicit": None}[expect]
        assert routed.message.session == session and routed.message.to == "coder"
        assert decision.arm == ("explicit" if route == "explicit" else "smart")
        assert decision.decision == {"fork": "existing", "new": "new", "explicit": "new" if route == "hybrid"
                                     else "explicit"}[expect]  # fmt: skip
        label = broker.session_label("coder", session)
        assert decision.session_label == label and (await ledger.turns.path(label))[-1].status == "completed"


async def test_a_retried_routed_message_goes_where_it_went_and_is_decided_once(isolated_env: Path) -> None:
    """A client's retry with the same id recorded another decision each time (even in the explicit arm), so
    ``nexus route stats`` counted one message several times (a trial)."""
    scripted = _model("ok")
    task = "the login rate limiter should answer 429 with a JSON body"
    with Ledger.open(isolated_env / "agents.db") as ledger:
        async with running_broker(load_config(), ledger, stream_fn=scripted.stream) as host:
            broker = host.broker
            await _coder(broker, scripted)
            first = await broker.send_routed(
                AgentMessage(id="r1", from_="user", to="coder", content=task), route="smart"
            )
            retries = [
                await broker.send_routed(AgentMessage(id="r1", from_="user", to="coder", content=task), route=route)
                for route in ("smart", "explicit", "hybrid")
            ]
            await broker.wait_until_idle()
            decisions = [d for d in broker.routing.router.decisions.decisions() if d.message_id == "r1"]
    assert first.message.session == "fork:r1" and not first.receipt.duplicate
    assert [(r.message.to, r.message.session, r.receipt.duplicate) for r in retries] == [("coder", "fork:r1", True)] * 3
    assert [r.decision for r in retries] == [None] * 3 and all("sent before" in r.notes[0] for r in retries)
    assert [(d.arm, d.decision) for d in decisions] == [("smart", "existing")], "one message, one decision"
    assert scripted.pending == 0, "it ran once"


async def test_routing_modes_are_checked(isolated_env: Path) -> None:
    scripted = ScriptedModel([])
    with Ledger.open(isolated_env / "agents.db") as ledger:
        async with running_broker(load_config(), ledger, stream_fn=scripted.stream) as host:
            broker = host.broker
            with pytest.raises(RoutingError, match="routing mode 'clever' is not one of explicit, smart, hybrid"):
                broker.set_routing_mode("clever")
            broker.set_routing_mode("hybrid", agent="coder")
            assert broker.routing.mode_for("coder") == "hybrid" and broker.routing.mode_for("other") == "explicit"
            broker.set_routing_mode("smart")
            assert broker.routing.mode_for("other") == "smart"


async def test_the_index_worker_is_woken_by_each_run_of_the_broker(isolated_env: Path) -> None:
    """``[routing] index = true`` in ``nexus serve``: a run's end wakes the worker (its poll here: an hour)."""
    import asyncio
    import time

    from nexus.broker.smart import SmartRouting, index_after_runs
    from nexus.routing import Router, RouteSettings

    scripted = _model()
    with Ledger.open(isolated_env / "agents.db") as ledger:
        async with running_broker(load_config(), ledger, stream_fn=scripted.stream) as host:
            broker = host.broker
            broker.use_router(SmartRouting(lambda: Router(ledger, RouteSettings(poll_s=3600.0))))
            router = await index_after_runs(host.runtime, broker.routing)
            assert router.index.snapshot().n == 0
            await _coder(broker, scripted)  # five runs
            deadline = time.monotonic() + 60
            while router.index.snapshot().n < len(PAST):
                assert time.monotonic() < deadline, "no run woke the index worker"
                await asyncio.sleep(0.05)
            assert router.indexer.catch_up(None) == 0  # nothing was left for a decision to catch up with


async def test_a_task_sent_to_no_agent_is_routed_to_an_agents_work_only(isolated_env: Path) -> None:
    """``nexus send --route smart TASK`` (no agent) failed with "checkpoint … belongs to no agent" whenever the
    best match was a session no agent talks in (a ``nexus run`` session, an imported one): such sessions are
    no candidates then, the agent's own work is."""
    login = "Add rate limiting to the login endpoint, then make the limiter answer 429 with a JSON body"
    scripted = _model("The limiter answers 429 with a JSON body", "done in the fork")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        async with running_broker(load_config(), ledger, stream_fn=scripted.stream) as host:
            broker = host.broker
            await _coder(broker, scripted)
            plain = host.runtime.start(AgentSpec(model=scripted.model.ref), "main", login)  # as `nexus run` does
            assert (await plain.result).stop_reason == "end_turn"
            best = await broker.route_smart(login)  # the route itself still sees every session
            assert best.checkpoint is not None and best.checkpoint.agent_id is None
            routed = await broker.send_routed(AgentMessage(id="r1", from_="user", to="", content=login), route="smart")
            await broker.wait_until_idle()
        assert routed.decision is not None and routed.decision.checkpoint is not None
        assert routed.decision.checkpoint.agent_id == "coder"
        assert routed.message.to == "coder" and routed.message.session == "fork:r1"
        label = broker.session_label("coder", "fork:r1")
        assert (await ledger.turns.path(label))[-1].status == "completed"
