"""``nexus serve``'s HTTP API: message accepts per second, and the OpenAI facade's cost per request.

Run:  PYTHONPATH=src .venv/bin/python bench/bench_server.py [--requests 3000] [--turns 200] [--uvloop]

1. ``POST /v1/agents/{id}/messages`` against a real uvicorn in a child process, twice: with the
   agents in ``collect`` mode and a long debounce (no turn runs while the requests arrive: the API's
   own capacity), then in ``followup`` mode (the broker runs a scripted turn per message meanwhile).
   A request counts when its 202 came back, i.e. the queue item is committed.
   Targets (issue 12): >= 1,000 requests/s, p99 < 20 ms.
   Each is measured twice per round, interleaved: the child set up as ``nexus serve`` sets up its
   process (WAL checkpoints on their own thread, the startup heap frozen out of the collector's
   sight), and plain (the baseline: every checkpoint and full collection on the event loop).
   The child reports its stalls: full (gen 2) collections and commits slower than 5 ms.
2. The OpenAI facade: ``POST /v1/chat/completions`` (not streamed) to a uvicorn in this process,
   against the same turn started with ``Runtime.start`` (no HTTP, no queue), one at a time,
   alternating in one session. Target: the facade adds < 2 ms per request.

The client is a minimal keep-alive HTTP/1.1 writer/reader on raw sockets, so the numbers are the
server's, not an HTTP library's. Both sides run on the same machine (2 cores here).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nexus.ledger import NewSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import header, load_line

AGENTS = 4


def _p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] if len(samples) >= 100 else max(samples)


async def _make_broker(directory: Path, steps: int, *, defer: bool = False) -> tuple[Any, Any, Any, Any]:
    """A broker on the scripted model; ``defer``: collect mode with a long debounce, so no turn runs
    while the requests arrive (the API's own accept capacity), else followup (turns run meanwhile)."""
    from nexus.broker import AgentBroker, AgentIdentity, BrokerSettings, QueueSettings
    from nexus.broker.spawner import BrokerSpawner
    from nexus.config import load_config
    from nexus.engine import AgentSpec, Runtime
    from nexus.engine.execution.cooldowns import ProfileCooldowns
    from nexus.ledger import Ledger
    from nexus.testing import ScriptedModel
    from nexus.testing.steps import text

    ledger = Ledger.open(directory / "agents.db")
    # record=False: a recording model deep-copies each call's whole context (O(n) per turn, growing)
    scripted = ScriptedModel([text("ok, done.")] * steps, record=False)
    env = Runtime(load_config(), ledger, stream_fn=scripted.stream, cooldowns=ProfileCooldowns())
    broker = AgentBroker(
        ledger,
        env,
        BrokerSettings(
            queue=QueueSettings(mode="collect" if defer else "followup", debounce_ms=600_000 if defer else 1000)
        ),
    )
    env.spawner = BrokerSpawner(broker)
    await broker.start()
    for agent_id in [*(f"a{n}" for n in range(AGENTS)), "chat"]:
        await ledger.sessions.ensure(NewSession(f"agent:{agent_id}"))
        broker.register_agent(
            AgentIdentity(agent_id, f"agent:{agent_id}", "worker"), spec=AgentSpec(model=scripted.model.ref)
        )
    return ledger, broker, env, scripted


def _server_main(directory: str, steps: int, port_pipe: Any, defer: bool, use_uvloop: bool, served: bool) -> None:
    """The child: broker + API on uvicorn, 127.0.0.1, a free port sent back through the pipe; on SIGTERM it
    sends back its stalls. ``served``: the process set up as ``nexus serve`` does it."""
    from nexus.ledger._checkpoint import WalCheckpointer
    from nexus.ledger.broker_store import BrokerStore
    from nexus.server._state import ServerState
    from nexus.server.app import create_app
    from nexus.server.serve import settle_heap

    async def main() -> None:
        ledger, broker, env, _ = await _make_broker(Path(directory), steps, defer=defer)
        checkpointer = WalCheckpointer(ledger.database)
        app = create_app(ServerState(ledger, BrokerStore(ledger.database), broker=broker, runtime=env))
        if served:
            checkpointer.start()
            settle_heap()
        stalls = _watch_stalls(ledger)
        server, task = await _uvicorn(app)
        signal.signal(signal.SIGTERM, lambda *_: port_pipe.send(stalls) or os._exit(0))
        port_pipe.send(server.servers[0].sockets[0].getsockname()[1])
        await task

    if use_uvloop:  # what `nexus serve` runs on when uvloop is installed
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def _watch_stalls(ledger: Any) -> dict[str, list[float]]:
    """Record every full collection's pause and every commit over 5 ms (ms), as they happen."""
    stalls: dict[str, list[float]] = {"gc2": [], "gc_all": [], "slow_commits": []}
    started: list[float] = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        pause = (time.perf_counter() - started[0]) * 1000
        stalls["gc_all"].append(pause)
        if info["generation"] == 2:
            stalls["gc2"].append(pause)

    gc.callbacks.append(on_gc)
    write = ledger.database.write

    def timed_write(fn: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return write(fn, **kwargs)
        finally:
            if (elapsed := (time.perf_counter() - t0) * 1000) > 5:
                stalls["slow_commits"].append(elapsed)

    ledger.database.write = timed_write
    return stalls


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
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
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
    """Per-request ms: the facade over HTTP, and the same turn started with ``Runtime.start`` (alternating).

    Server and client share this process and its loop, so the difference is the facade's own work
    (HTTP parsing, validation, the durable queue accept and claim, the usage lookup), not the OS
    waking another process on a busy machine.
    """

    from nexus.engine import AgentSpec
    from nexus.ledger.broker_store import BrokerStore
    from nexus.server._state import ServerState
    from nexus.server.app import create_app

    ledger, broker, env, scripted = await _make_broker(directory, 2 * turns + 40)
    app = create_app(ServerState(ledger, BrokerStore(ledger.database), broker=broker, runtime=env))
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
        outcome = await env.run(AgentSpec(id="chat", role="worker", model=scripted.model.ref), "agent:chat", "hello")
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


Accepts = tuple[float, list[float], dict[str, list[float]]]


def _accepts_against_child(
    directory: Path, requests: int, connections: int, defer: bool, use_uvloop: bool, served: bool
) -> Accepts:
    """(requests/s, latencies ms, the child's stalls) for one child server."""
    receive, send = multiprocessing.Pipe(duplex=False)
    args = (str(directory), requests + 100, send, defer, use_uvloop, served)
    child = multiprocessing.get_context("spawn").Process(target=_server_main, args=args)
    child.start()
    port = int(receive.recv())
    try:
        rate, latencies = asyncio.run(bench_accepts(port, requests, connections))
    finally:
        child.terminate()
        stalls = receive.recv() if receive.poll(10) else {"gc2": [], "gc_all": [], "slow_commits": []}
        child.join()
    return rate, latencies, stalls


def _measure_accepts(args: argparse.Namespace, tmp: Path) -> dict[tuple[bool, bool], list[Accepts]]:
    """Every (defer, served) pair once per round, interleaved so a busy neighbour hits them alike."""
    results: dict[tuple[bool, bool], list[Accepts]] = {}
    for round_number in range(args.rounds):
        for defer in (True, False):
            for served in (False, True):
                directory = tmp / f"r{round_number}-{'deferred' if defer else 'draining'}-{served}"
                directory.mkdir()
                measured = _accepts_against_child(
                    directory, args.requests, args.connections, defer, args.uvloop, served
                )
                results.setdefault((defer, served), []).append(measured)
    return results


def _accept_rows(results: dict[tuple[bool, bool], list[Accepts]]) -> None:
    print("| POST /messages, accepted durably | process | req/s (median of rounds) | p50 / p99 ms (all requests) |"
          " p99 ratio to plain | full GCs: n, max ms | all GCs: total ms | commits > 5 ms: n, max ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for defer, label in ((True, "no turn runs meanwhile"), (False, "while the broker runs the turns")):
        plain_p99 = _p([ms for _, latencies, _ in results[(defer, False)] for ms in latencies], 99)
        for served in (False, True):
            runs = results[(defer, served)]
            latencies = [ms for _, run_latencies, _ in runs for ms in run_latencies]
            gcs = [ms for *_, stalls in runs for ms in stalls["gc2"]]
            slow = [ms for *_, stalls in runs for ms in stalls["slow_commits"]]
            all_gc = sum(ms for *_, stalls in runs for ms in stalls["gc_all"]) / len(runs)
            p99 = _p(latencies, 99)
            print(
                f"| {label} | {'as nexus serve' if served else 'plain (baseline)'} | "
                f"{statistics.median(rate for rate, _, _ in runs):,.0f} | {_p(latencies, 50):.2f} / {p99:.2f} | "
                f"{p99 / plain_p99:.2f} | {len(gcs)}, {max(gcs, default=0):.1f} | {all_gc:.0f} per round | "
                f"{len(slow)}, {max(slow, default=0):.1f} |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--uvloop", action="store_true", help="run the server child on uvloop (part 1 only)")
    parser.add_argument("--no-facade", action="store_true", help="part 1 only")
    args = parser.parse_args()
    print(header("bench_server: nexus serve HTTP API"))
    with tempfile.TemporaryDirectory() as tmp:
        accepts = _measure_accepts(args, Path(tmp))
        if not args.no_facade:
            (Path(tmp) / "facade").mkdir()
            facade, direct = asyncio.run(bench_facade(args.turns, Path(tmp) / "facade"))
    print()
    print(f"targets: >= 1,000 req/s and p99 < 20 ms; {args.rounds} round(s) of {args.requests:,} requests over "
          f"{args.connections} connections each{', server on uvloop' if args.uvloop else ''}")  # fmt: skip
    _accept_rows(accepts)
    if not args.no_facade:
        overhead = statistics.median(facade) - statistics.median(direct)
        print()
        print("| measure | value | target |")
        print("|---|---|---|")
        print(
            f"| chat completion via the facade (HTTP + queue + turn), median | {statistics.median(facade):.2f} ms | |"
        )
        print(f"| same turn by Runtime.start in process, median | {statistics.median(direct):.2f} ms | |")
        print(f"| facade overhead per request (median difference) | {overhead:.2f} ms | < 2 ms |")
    print()
    print(load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
