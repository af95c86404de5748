"""``nexus serve``'s HTTP API: message accepts per second, and the OpenAI facade's cost per request.

Run:  PYTHONPATH=src .venv/bin/python bench/bench_server.py [--requests 3000] [--turns 200] [--uvloop]

1. ``POST /v1/agents/{id}/messages`` against a real uvicorn in a child process, twice: with the
   agents in ``collect`` mode and a long debounce (no turn runs while the requests arrive: the API's
   own capacity), then in ``followup`` mode (the broker runs a scripted turn per message meanwhile).
   A request counts when its 202 came back, i.e. the queue item is committed.
   Targets (issue 12): >= 1,000 requests/s, p99 < 20 ms.
2. The OpenAI facade: ``POST /v1/chat/completions`` (not streamed) to a uvicorn in this process,
   against the same turn run by the broker's engine runner (no HTTP, no queue), one at a time,
   alternating in one session. Target: the facade adds < 2 ms per request.

The client is a minimal keep-alive HTTP/1.1 writer/reader on raw sockets, so the numbers are the
server's, not an HTTP library's. Both sides run on the same machine (2 cores here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import header, load_line

AGENTS = 4


def _p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] if len(samples) >= 100 else max(samples)


async def _make_broker(directory: Path, steps: int, *, defer: bool = False) -> tuple[Any, Any, Any, Any]:
    """A broker on the scripted model; ``defer``: collect mode with a long debounce, so no turn runs
    while the requests arrive (the API's own accept capacity), else followup (turns run meanwhile)."""
    from nexus.broker import AgentBroker, AgentIdentity, BrokerSettings, QueueSettings
    from nexus.broker.engine_runner import EngineRunner
    from nexus.config import load_config
    from nexus.engine.execution.failover import ProfileCooldowns
    from nexus.engine.wiring.runner import EngineEnv
    from nexus.ledger import Ledger
    from nexus.ledger.broker_store import BrokerStore
    from nexus.testing import ScriptedModel
    from nexus.testing.steps import text

    ledger = Ledger.open(directory / "agents.db")
    scripted = ScriptedModel([text("ok, done.")] * steps)
    env = EngineEnv.from_config(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    runner = EngineRunner(env)
    broker = AgentBroker(
        BrokerStore(ledger.database),
        runner,
        BrokerSettings(
            queue=QueueSettings(mode="collect" if defer else "followup", debounce_ms=600_000 if defer else 1000)
        ),
    )
    runner.attach(broker)
    await broker.start()
    for agent_id in [*(f"a{n}" for n in range(AGENTS)), "chat"]:
        ledger.ensure_session(f"agent:{agent_id}")
        broker.register_agent(
            AgentIdentity(agent_id, f"agent:{agent_id}", "worker"), spec={"model": scripted.model.ref}
        )
    return ledger, broker, runner, scripted


def _server_main(directory: str, steps: int, port_pipe: Any, defer: bool, use_uvloop: bool) -> None:
    """The child: broker + API on uvicorn, 127.0.0.1, a free port sent back through the pipe."""
    from nexus.ledger.broker_store import BrokerStore
    from nexus.server._state import ServerState
    from nexus.server.app import create_app

    async def main() -> None:
        ledger, broker, runner, _ = await _make_broker(Path(directory), steps, defer=defer)
        app = create_app(ServerState(ledger, BrokerStore(ledger.database), broker=broker, runner=runner))
        server, task = await _uvicorn(app)
        port_pipe.send(server.servers[0].sockets[0].getsockname()[1])
        await task
        await broker.close()

    if use_uvloop:  # what uvicorn's own runner would pick; nexus serve runs the standard loop today
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


async def _uvicorn(app: Any) -> tuple[Any, asyncio.Task[None]]:
    """A uvicorn serving ``app`` on 127.0.0.1 (a free port) in this loop, once it listens."""
    import uvicorn

    from nexus.server.serve import NexusUvicorn

    server = NexusUvicorn(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="error", access_log=False)
    )
    task = asyncio.get_running_loop().create_task(server.serve())
    await server.ready.wait()
    return server, task


class Connection:
    """One keep-alive HTTP/1.1 connection: send a JSON POST, read the whole response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def bench_accepts(port: int, requests: int, connections: int) -> tuple[float, list[float]]:
    conns = [await Connection.open(port) for _ in range(connections)]
    latencies: list[float] = []
    counter = iter(range(requests))

    async def worker(conn: Connection) -> None:
        for n in counter:
            t0 = time.perf_counter()
            status, _ = await conn.post(f"/v1/agents/a{n % AGENTS}/messages", {"content": f"task {n}", "id": f"b-{n}"})
            latencies.append((time.perf_counter() - t0) * 1000)
            assert status == 202, status

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - start
    for c in conns:
        c.close()
    return requests / elapsed, latencies


async def bench_facade(turns: int, directory: Path) -> tuple[list[float], list[float]]:
    """Per-request ms: the facade over HTTP, and the same turn run by the engine runner (alternating).

    Server and client share this process and its loop, so the difference is the facade's own work
    (HTTP parsing, validation, the durable queue accept and claim, the usage lookup), not the OS
    waking another process on a busy machine.
    """

    from nexus.broker.runner import RunRequest
    from nexus.ledger.broker_store import BrokerStore
    from nexus.server._state import ServerState
    from nexus.server.app import create_app

    ledger, broker, runner, scripted = await _make_broker(directory, 2 * turns + 40)
    app = create_app(ServerState(ledger, BrokerStore(ledger.database), broker=broker, runner=runner))
    server, task = await _uvicorn(app)
    conn = await Connection.open(server.servers[0].sockets[0].getsockname()[1])
    facade: list[float] = []
    direct: list[float] = []
    body = {"model": "chat", "messages": [{"role": "user", "content": "hello"}]}
    for n in range(turns + 10):
        t0 = time.perf_counter()
        status, _ = await conn.post("/v1/chat/completions", body)
        assert status == 200, status
        t1 = time.perf_counter()
        handle = runner.start(RunRequest("chat", "agent:chat", "hello", (), spec={"model": scripted.model.ref}))
        outcome = await handle.result()
        assert outcome.status == "completed", outcome
        t2 = time.perf_counter()
        if n >= 10:  # warm-up
            facade.append((t1 - t0) * 1000)
            direct.append((t2 - t1) * 1000)
    conn.close()
    server.should_exit = True
    await task
    await broker.close()
    ledger.close()
    return facade, direct


def _accepts_against_child(
    directory: Path, requests: int, connections: int, defer: bool, use_uvloop: bool
) -> tuple[float, list[float]]:
    receive, send = multiprocessing.Pipe(duplex=False)
    args = (str(directory), requests + 100, send, defer, use_uvloop)
    child = multiprocessing.get_context("spawn").Process(target=_server_main, args=args)
    child.start()
    port = int(receive.recv())
    try:
        return asyncio.run(bench_accepts(port, requests, connections))
    finally:
        child.terminate()
        child.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--uvloop", action="store_true", help="run the server child on uvloop (part 1 only)")
    args = parser.parse_args()
    print(header("bench_server: nexus serve HTTP API"))
    accepts: dict[bool, tuple[float, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for defer in (True, False):
            directory = Path(tmp) / ("deferred" if defer else "draining")
            directory.mkdir()
            accepts[defer] = _accepts_against_child(directory, args.requests, args.connections, defer, args.uvloop)
        (Path(tmp) / "facade").mkdir()
        facade, direct = asyncio.run(bench_facade(args.turns, Path(tmp) / "facade"))
    overhead = statistics.median(facade) - statistics.median(direct)
    print()
    print("| measure | value | target |")
    print("|---|---|---|")
    for defer, label in ((True, "no turn runs meanwhile"), (False, "while the broker runs the turns")):
        rate, latencies = accepts[defer]
        print(f"| POST /messages accepted durably, {label} | {rate:,.0f} req/s | >= 1,000 req/s |")
        print(f"| … latency p50 / p99 | {_p(latencies, 50):.2f} / {_p(latencies, 99):.2f} ms | p99 < 20 ms |")
    print(f"| chat completion via the facade (HTTP + queue + turn), median | {statistics.median(facade):.2f} ms | |")
    print(f"| same turn by the engine runner in process, median | {statistics.median(direct):.2f} ms | |")
    print(f"| facade overhead per request (median difference) | {overhead:.2f} ms | < 2 ms |")
    print()
    print(load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
