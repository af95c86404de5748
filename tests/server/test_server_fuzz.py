"""Schema-driven fuzzing (schemathesis) of every operation in /openapi.json: no input makes the server fail.

The app runs over a temp ledger holding a session with turns and a registered agent, without a
live broker (schemathesis drives the ASGI app from its own thread and loop). Hypothesis gets a
small budget per operation so the whole run stays well under a minute; it is part of the suite,
so CI runs it with the other tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

from nexus.config._server_schema import ServerConfig  # noqa: E402
from nexus.ledger import Ledger  # noqa: E402
from nexus.ledger.broker_store import BrokerStore  # noqa: E402
from nexus.llm.types import AssistantMessage, TextContent, UserMessage  # noqa: E402
from nexus.server._state import ServerState  # noqa: E402
from nexus.server.app import create_app  # noqa: E402

EXAMPLES_PER_OPERATION = 20


def _ndjson(_: Any, value: Any) -> bytes:
    """``POST /v1/sessions/import`` takes pi JSONL: any generated value, one JSON document per line."""
    import json

    items = value if isinstance(value, list) else [value]
    return "\n".join(json.dumps(item) for item in items).encode()


schemathesis.serializer("application/x-ndjson")(_ndjson)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Any]:
    """The API over a temp ledger: a session with two turns and a registered agent (no live broker)."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        ledger.create_session("main")
        for n in range(2):
            reply = AssistantMessage(content=[TextContent(f"answer {n}")], provider="openai", model="gpt-4o-mini")
            ledger.write_turn(None, "main", query_messages=[UserMessage(f"question {n}")], response_messages=[reply])
        store = BrokerStore(ledger.database)
        ledger.ensure_session("agent:coder")
        store.save_agent("coder", role="worker", session_label="agent:coder", spec={})
        yield create_app(ServerState(ledger, store), ServerConfig(max_body_bytes=200_000))


def _check(case: Any) -> None:
    response = case.call()
    case.validate_response(response, checks=(not_a_server_error,))
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"type", "message"}, response.text


@pytest.mark.slow
def test_no_input_makes_the_server_fail(app: Any) -> None:
    # schemathesis' pytest loader (from_fixture) does not run on pytest 9, so each operation's
    # strategy is driven by hypothesis directly: the same cases, the same check.
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        fuzz = given(case=operation.as_strategy())(_check)
        settings(
            max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck),
            derandomize=True, database=None,
        )(fuzz)()  # fmt: skip
