"""Schema-driven fuzzing (schemathesis) of every operation in /openapi.json: no input makes the server
fail, and every answer is one the document describes — its status, its media type, its body.

The app runs over a temp ledger holding a session with turns (one calls a tool), a registered
agent with a queued message, without a live broker (schemathesis drives the ASGI app from its own
thread and loop). Each operation gets valid inputs and, where its schema can be violated, invalid
ones. Generated requests mostly hit error paths (random labels are unknown), so each GET operation
is also called once on the seeded resources and its success body checked against the schema.
Hypothesis gets a small budget per operation; it is part of the suite, so CI runs it.
``NEXUS_FUZZ_EXAMPLES=N`` raises the budget (and draws new inputs each run) for a long run by hand.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.ledger import NewSession
from nexus.ledger._sql_db import run_inline

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode  # noqa: E402

from nexus import telemetry  # noqa: E402
from nexus.config._server_schema import ServerConfig  # noqa: E402
from nexus.ledger import Ledger  # noqa: E402
from nexus.ledger.broker_store import AcceptRequest, BrokerStore  # noqa: E402
from nexus.server._state import ServerState  # noqa: E402
from nexus.server.app import create_app  # noqa: E402

from .live import seed_ledger  # noqa: E402

EXAMPLES_PER_OPERATION = int(os.environ.get("NEXUS_FUZZ_EXAMPLES", "20"))
"""Per operation and mode; ``NEXUS_FUZZ_EXAMPLES=230`` makes ~10,000 requests, then with a random seed."""
CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
)


def _ndjson(_: Any, value: Any) -> bytes:
    """``POST /v1/sessions/import`` takes pi JSONL: any generated value, one JSON document per line."""
    import json

    items = value if isinstance(value, list) else [value]
    return "\n".join(json.dumps(item) for item in items).encode()


schemathesis.serializer("application/x-ndjson")(_ndjson)


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[tuple[Any, Ledger]]:
    """The API over a temp ledger: session ``main`` with three turns, agent ``coder`` with a queued message
    and a message from ``coder`` to agent ``reviewer`` (an agent-to-agent message)."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        seed_ledger(ledger)
        store = BrokerStore(ledger.database)
        run_inline(ledger.sessions.ensure(NewSession("agent:coder")))
        store.save_agent("coder", role="worker", session_label="agent:coder", spec={"model": "openai/gpt-4o-mini"})
        store.save_agent("reviewer", role="worker", session_label="agent:reviewer", spec={})
        store.accept_many([
            AcceptRequest("coder", "agent:coder", "m-1", "user", {"content": "hi"}, "followup", False),
            AcceptRequest("reviewer", "agent:reviewer", "m-2", "coder", {"content": "review it"}, "followup", True),
        ])  # fmt: skip
        telemetry.enable_metrics()  # GET /metrics answers, as in nexus serve
        try:
            yield create_app(ServerState(ledger, store), ServerConfig(max_body_bytes=200_000)), ledger
        finally:
            telemetry.disable()


def _check(case: Any) -> None:
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    if response.status_code >= 400:
        assert set(response.json()["error"]) <= {"type", "message", "param", "code"}, response.text


@pytest.mark.slow
def test_no_input_makes_the_server_fail_or_answer_off_the_schema(seeded: tuple[Any, Ledger]) -> None:
    # schemathesis' pytest loader (from_fixture) does not run on pytest 9, so each operation's
    # strategy is driven by hypothesis directly: the same cases, the same checks.
    app, _ = seeded
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 21
    for operation, mode in itertools.product(operations, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)):
        fuzz = given(case=operation.as_strategy(mode))(_check)
        try:
            settings(
                max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
                derandomize="NEXUS_FUZZ_EXAMPLES" not in os.environ, database=None,
            )(fuzz)()  # fmt: skip
        except Unsatisfiable:  # no input can violate this operation's schema (free-text path parameters only)
            assert mode is GenerationMode.NEGATIVE, operation.path


def test_every_success_body_matches_its_schema(seeded: tuple[Any, Ledger]) -> None:
    """Each GET on real resources: a session with a tool call, a turn, an agent and its queue."""
    app, ledger = seeded
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    turn = run_inline(ledger.turns.path("main"))[1].id  # the turn that called a tool
    values = {"label": "main", "turn_id": turn, "agent_id": "coder"}
    checked = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() != "GET" or operation.path.endswith("/events"):
            continue  # an event stream never ends: its 200 is checked in test_server_events.py
        names = [p.name for p in operation.path_parameters]
        case = operation.Case(path_parameters={name: values[name] for name in names}, query={})
        response = case.call()
        assert response.status_code == 200, (operation.path, response.text)
        if operation.path == "/v1/agent-messages":
            assert response.json()["messages"][0]["from"] == "coder", "the agent-to-agent message is listed"
        case.validate_response(response, checks=CHECKS)
        checked.append(operation.path)
    assert len(checked) == 14, checked
