"""A server app with a live broker on the scripted model, over a temp ledger (shared by the server tests)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from nexus.broker import AgentBroker, AgentIdentity, BrokerSettings, QueueSettings
from nexus.broker.spawner import BrokerSpawner
from nexus.config import load_config
from nexus.config._server_schema import ServerConfig
from nexus.engine import AgentSpec, Runtime
from nexus.engine.execution.cooldowns import ProfileCooldowns
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.server._state import ServerState
from nexus.server.app import create_app
from nexus.testing import ScriptedModel


@dataclass(slots=True)
class LiveApp:
    """The pieces a test looks at: the ledger, the store, the broker and the ASGI app."""

    ledger: Ledger
    store: BrokerStore
    broker: AgentBroker
    app: Any

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://nexus.test")


@asynccontextmanager
async def live_app(
    tmp_path: Path,
    scripted: ScriptedModel,
    config: ServerConfig | None = None,
    *,
    mode: str = "followup",
    max_concurrent: int | None = None,
) -> AsyncIterator[LiveApp]:
    """A broker draining agent ``coder`` (worker) and ``lead`` (manager) on ``scripted``."""
    with Ledger.open(tmp_path / "agents.db") as ledger:
        env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
        store = BrokerStore(ledger.database)
        settings = BrokerSettings(queue=QueueSettings(mode=mode))  # type: ignore[arg-type]
        if max_concurrent is not None:
            settings = replace(settings, max_concurrent=max_concurrent)
        broker = AgentBroker(ledger, env, settings)
        env.spawner = BrokerSpawner(broker)
        await broker.start()
        for agent_id, role in (("coder", "worker"), ("lead", "manager")):
            await ledger.sessions.ensure(NewSession(f"agent:{agent_id}"))
            broker.register_agent(
                AgentIdentity(agent_id, f"agent:{agent_id}", role),  # type: ignore[arg-type]
                spec=AgentSpec(model=scripted.model.ref),
            )
        app = create_app(ServerState(ledger, store, broker=broker, runtime=env), config)
        try:
            yield LiveApp(ledger, store, broker, app)
        finally:
            await broker.close()


@asynccontextmanager
async def listening(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with a real uvicorn on 127.0.0.1 (a free port) in this loop; yields the base URL."""
    server = _QuietServer(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning"))
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn did not start"
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


class _QuietServer(uvicorn.Server):
    """uvicorn that leaves the test process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def wait_until(predicate: Any, *, within_s: float = 20.0) -> None:
    """Poll ``predicate`` (sync) every 10 ms until it is true; fails after ``within_s`` seconds."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)
