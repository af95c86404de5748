"""Smart routing on the backend (optional ``routing``): checkpoints indexed from its turns, decisions recorded.

Routing keeps its index and decisions in the ledger's own database (:func:`nexus.routing.open_route_store`:
SQLite and PostgreSQL have one); a backend without a route store skips these tests, naming the capability.
The router is run lexical-only (no embedder) so the answers do not depend on an embedding model, and off
the event loop, as the broker runs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.testing.conformance.support import need, qa_turn

T = TypeVar("T")

_WORK = {
    "auth": ("Add rate limiting to the login endpoint, 5 attempts per minute", "Added a sliding window limiter"),
    "ops": ("Shrink the Docker image of the API with a multi-stage build", "Multi-stage Dockerfile, 240 MB"),
    "billing": ("Generate a PDF invoice when an order is paid", "The invoice is rendered with WeasyPrint"),
}


async def _off_loop(call: Callable[[], T]) -> T:
    return await asyncio.to_thread(call)


async def _turn(ledger: Ledger, label: str, ask: str, answer: str) -> str:
    await ledger.sessions.ensure(NewSession(label))
    return await qa_turn(ledger, label, ask, answer)


async def _work(ledger: Ledger) -> dict[str, str]:
    return {label: await _turn(ledger, label, ask, answer) for label, (ask, answer) in _WORK.items()}


def _router(ledger: Ledger) -> Any:
    from nexus.routing import Router

    return Router(ledger, embedder=None)


async def test_routing_finds_the_turn_a_task_continues_and_records_the_decision(ledger: Ledger) -> None:
    need(ledger, "routing")
    from nexus.routing import RoutingError

    turns = await _work(ledger)
    router = await _off_loop(lambda: _router(ledger))
    try:
        result = await _off_loop(lambda: router.route("the pdf invoice for paid orders needs the VAT number"))
        assert result.checkpoint is not None and result.checkpoint.turn_id == turns["billing"]
        assert result.checkpoint.session_key == "billing" and result.decision_id is not None
        decision = result.decision_id
        await _off_loop(lambda: router.decisions.feedback(decision, 1, "right place"))
        recorded = await _off_loop(router.decisions.decisions)
        assert [(d.id, d.turn_id == turns["billing"] or d.decision == "new", d.feedback) for d in recorded] == [
            (decision, True, 1)
        ]
        with pytest.raises(RoutingError, match="no routing decision"):
            await _off_loop(lambda: router.decisions.feedback("no-such-decision", -1))
    finally:
        await _off_loop(router.close)


async def test_routing_indexes_a_later_turn_and_a_new_router_loads_the_same_index(ledger: Ledger) -> None:
    need(ledger, "routing")
    turns = await _work(ledger)
    first = await _off_loop(lambda: _router(ledger))
    try:
        assert await _off_loop(first.catch_up) == 3
        turns["cache"] = await _turn(ledger, "cache", "Cache the exchange rates for an hour", "Redis with a TTL")
        found = await _off_loop(lambda: first.route("exchange rates cached in redis", record=False))
        assert found.checkpoint is not None and found.checkpoint.turn_id == turns["cache"]
        assert await _off_loop(first.store.count) == 4
    finally:
        await _off_loop(first.close)
    second = await _off_loop(lambda: _router(ledger))  # a new process: the index is loaded, not rebuilt
    try:
        assert len(second.index) == 4 and len(second.index.postings) == 4
        again = await _off_loop(lambda: second.route("exchange rates cached in redis", record=False, catch_up=False))
        assert again.checkpoint is not None and again.checkpoint.turn_id == turns["cache"]
        assert again.confidence == pytest.approx(found.confidence)
        assert await _off_loop(second.reindex) == 4
    finally:
        await _off_loop(second.close)
