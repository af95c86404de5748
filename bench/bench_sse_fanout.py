#!/usr/bin/env python3
"""SSE fan-out: N concurrent subscribers to one session's ``/v1/sessions/{label}/events``.

One server process (uvicorn + ``create_app`` over a temporary ledger) and, in it, a publisher
that waits until all N subscribers are connected, then publishes ``--events`` token events at
``--rate`` events/s through ``EventHub.publish`` (exactly the call the broker makes), then a
``stream_end``. Each event carries its publish time (``time.monotonic``, one clock for every
process on the machine). ``--procs`` client processes hold the N connections on raw asyncio
sockets (the least a client can do) and record, for every event each subscriber gets, the delay
from publish to its arrival.

The table: how many events each subscriber got (every subscriber must get every event), the
fan-out delay percentiles over all (subscriber, event) pairs, the server's RSS before the
subscribers, with them connected, and its peak, and the CPU time server and clients spent
(the delay depends on the CPU the server gets; the CPU per event per subscriber does not).
Server and clients run on uvloop (and uvicorn on httptools) when installed, as ``nexus serve``
does. The baseline is the target of issue 12: p99 below 100 ms with 1,000 subscribers. Clients
and server share the machine's cores, so the delays include client-side CPU time: this is an
upper bound for the server's part.

  PYTHONPATH=src .venv/bin/python bench/bench_sse_fanout.py [--subscribers 1000] [--events 200]
      [--rate 50] [--procs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import _machine

from nexus.ledger import NewSession

LABEL = "bench"
TARGET_P99_MS = 100.0


def _loop_run(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (as ``nexus serve`` does through uvicorn), else asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the server process ----------------------------------------------------------------------------


async def _poll(ready: Callable[[], bool]) -> None:
    """Wait (20 ms steps) until ``ready()``: the hub has no event to await for these conditions."""
    while not ready():  # noqa: ASYNC110
        await asyncio.sleep(0.02)


async def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    from nexus.ledger import Ledger
    from nexus.ledger.broker_store import BrokerStore
    from nexus.server._state import ServerState
    from nexus.server.app import create_app

    with tempfile.TemporaryDirectory(prefix="nexus-bench-sse-") as tmp, Ledger.open(Path(tmp) / "agents.db") as ledger:
        await ledger.sessions.create(NewSession(LABEL))
        state = ServerState(ledger, BrokerStore(ledger.database))
        app = create_app(state)
        hub = state.events
        assert hub is not None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(4096)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", backlog=4096, timeout_graceful_shutdown=5)
        server = uvicorn.Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await _poll(lambda: server.started)
        idle_rss = _rss_mb()
        print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
        await _poll(lambda: hub.subscriber_count >= args.subscribers)
        connected_rss = _rss_mb()
        interval = 1.0 / args.rate
        cpu_before = time.process_time()
        start = time.monotonic()
        for n in range(args.events):
            await asyncio.sleep(max(0.0, start + n * interval - time.monotonic()))
            hub.publish(LABEL, "token", {"text": "tok ", "t": time.monotonic()})
        hub.publish(LABEL, "stream_end", {"runId": "bench", "final": True})
        await _poll(lambda: hub.subscriber_count == 0)
        cpu = time.process_time() - cpu_before
        stats = {"idle_rss": idle_rss, "connected_rss": connected_rss, "peak_rss": _rss_mb("VmHWM"), "cpu": cpu}
        print(json.dumps(stats), flush=True)
        hub.close()
        server.should_exit = True
        await serving


# -- a client process ------------------------------------------------------------------------------


async def _subscriber(port: int, gate: asyncio.Semaphore, delays: list[float]) -> int:
    async with gate:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /v1/sessions/{LABEL}/events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode())
        await writer.drain()
    received, buffer = 0, b""
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                raise RuntimeError("the server closed a stream before stream_end")
            now = time.monotonic()
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if b"event: token" in frame:
                    data = json.loads(frame[frame.index(b"data: ") + 6 :].split(b"\r\n", 1)[0])
                    delays.append(now - data["t"])
                    received += 1
                elif b"event: stream_end" in frame:
                    return received
    finally:
        writer.close()


async def _clients(port: int, count: int) -> None:
    delays: list[float] = []
    gate = asyncio.Semaphore(64)  # connect 64 at a time: no SYN burst beyond the backlog
    cpu_before = time.process_time()
    counts = await asyncio.gather(*(_subscriber(port, gate, delays) for _ in range(count)))
    cpu = time.process_time() - cpu_before
    print(json.dumps({"counts": counts, "delays": delays, "cpu": cpu}), flush=True)


# -- the driver ------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _run(args: argparse.Namespace) -> dict[str, Any]:
    me = [sys.executable, __file__]
    server = subprocess.Popen([*me, "--serve", *_common(args)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    try:
        port = json.loads(server.stdout.readline())["port"]
        shares = [args.subscribers // args.procs + (i < args.subscribers % args.procs) for i in range(args.procs)]
        clients = [
            subprocess.Popen([*me, "--client", str(port), str(share)], stdout=subprocess.PIPE, text=True)
            for share in shares
        ]
        results = [json.loads(client.communicate(timeout=600)[0]) for client in clients]
        stats = json.loads(server.stdout.readline())
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    counts = [c for r in results for c in r["counts"]]
    delays_ms = [d * 1000 for r in results for d in r["delays"]]
    client_cpu = sum(r["cpu"] for r in results)
    return {"counts": counts, "delays_ms": delays_ms, "client_cpu": client_cpu, **stats}


def _common(args: argparse.Namespace) -> list[str]:
    return [f"--subscribers={args.subscribers}", f"--events={args.events}", f"--rate={args.rate}"]


def _row(args: argparse.Namespace, round_no: int, result: dict[str, Any]) -> str:
    counts, delays = result["counts"], result["delays_ms"]
    complete = sum(1 for c in counts if c == args.events)
    per_event = 1e6 / (args.events + 1) / args.subscribers
    return (
        f"| {round_no} | {complete} / {len(counts)} | {len(delays)} / {args.subscribers * args.events} "
        f"| {statistics.median(delays):.1f} | {_percentile(delays, 0.9):.1f} | {_percentile(delays, 0.99):.1f} "
        f"| {max(delays):.1f} | {result['cpu'] * per_event:.1f} | {result['client_cpu'] * per_event:.1f} "
        f"| {result['idle_rss']:.1f} / {result['connected_rss']:.1f} / {result['peak_rss']:.1f} |"
    )


def _report(args: argparse.Namespace) -> None:
    print()
    print(
        f"{args.subscribers} subscribers on one session, {args.events} token events at {args.rate:g}/s, "
        f"{args.rounds} rounds (a fresh server each); target: p99 < {TARGET_P99_MS:.0f} ms"
    )
    print("CPU = process time per event per subscriber (µs); RSS = server MB started / connected / peak")
    print(
        "| round | subscribers with every event | delivered / expected | p50 ms | p90 ms | p99 ms "
        "| max ms | server CPU | clients CPU | server RSS |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    p99s = []
    for round_no in range(1, args.rounds + 1):
        result = _run(args)
        p99s.append(_percentile(result["delays_ms"], 0.99))
        print(_row(args, round_no, result), flush=True)
    median = statistics.median(p99s)
    print()
    print(
        f"median p99 over {len(p99s)} rounds: {median:.1f} ms (target {'met' if median < TARGET_P99_MS else 'missed'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="token events per second")
    parser.add_argument("--procs", type=int, default=2, help="client processes holding the connections")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, each with a fresh server and clients")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=2, type=int, metavar=("PORT", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    _raise_fd_limit()
    if args.serve:
        _loop_run(_serve(args))
        return
    if args.client:
        _loop_run(_clients(*args.client))
        return
    print(_machine.header("SSE fan-out: subscribers of one session's /v1/sessions/{label}/events"))
    _report(args)
    print()
    print(_machine.load_line())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
