"""A real uvicorn server on 127.0.0.1 (a free port, in a thread) over a real ledger, for SSE and browser tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from nexus.config._server_schema import ServerConfig
from nexus.ledger import Ledger, NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.llm.types import AssistantMessage, Cost, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from nexus.server._event_hub import EventHub
from nexus.server._state import ServerState
from nexus.server.app import create_app


@dataclass(slots=True)
class LiveServer:
    """A running server: its base URL, ledger, broker store and event hub."""

    url: str
    ledger: Ledger
    store: BrokerStore
    hub: EventHub


EVENT_CONTEXT = "[Event context]\nTime: 2026-01-05T10:00:00+00:00 (UTC)\nChannel: web\n[/Event context]"


def seed_ledger(ledger: Ledger) -> None:
    """Session ``main`` with three turns (the second calls a tool and starts with an event context)."""
    run_inline(ledger.sessions.create(NewSession("main")))
    for n in range(3):
        response: list[AssistantMessage | ToolResultMessage] = []
        if n == 1:
            call = ToolCall(id="call_1", name="read", arguments={"path": "README.md"})
            response.append(AssistantMessage(content=[call], provider="openai", model="gpt-4o-mini"))
            response.append(ToolResultMessage(tool_call_id="call_1", tool_name="read", content=[TextContent("# hi")]))
        response.append(AssistantMessage(content=[TextContent(f"answer {n}")], provider="openai", model="gpt-4o-mini"))
        usage = Usage(input=100 + n, output=20 + n, total=120 + 2 * n, cost=Cost(total=0.0012 + n / 10_000))
        asked = f"{EVENT_CONTEXT}\n\nquestion {n}" if n == 1 else f"question {n}"  # as the engine stores it
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "main",
                    None,
                    query_messages=[UserMessage(asked)],
                    response_messages=response,
                    usage=usage,
                    details=TurnDetails(model="gpt-4o-mini", provider="openai"),
                )
            )
        )


@contextmanager
def run_server(ledger: Ledger, config: ServerConfig | None = None) -> Iterator[LiveServer]:
    """Start uvicorn on a free loopback port; on exit close the hub (ends SSE streams) and stop it."""
    store = BrokerStore(ledger.database)
    state = ServerState(ledger, store)
    app = create_app(state, config)
    assert state.events is not None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", ledger, store, state.events)
    finally:
        state.events.close()
        server.should_exit = True
        thread.join(15)
        sock.close()


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll ``predicate`` (10 ms steps) until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
