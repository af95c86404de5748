"""The full-size fault test (issue 22 §5): three broker processes on one PostgreSQL database under faults.

Run:  .venv/bin/python bench/fault_postgres.py [--agents 100] [--per-agent 50] [--seed 22]

A throwaway cluster is started with scripts/postgres.sh (and stopped after). 100 agents, their sessions
spread over every queue mode (followup, steer, collect, steer-backlog, queue, interrupt), get 50 messages
each (5,000) while three broker processes run them (scripted runs of ``--run-s`` each, as in the reduced CI
test ``tests/broker/test_lease_faults.py``: same processes, same check, ``nexus.testing.faults``). Every
2-4 s until the last message is done a fault: a random broker SIGKILLed and started again (70 %), or its
PostgreSQL connections ended with ``pg_terminate_backend``; once, after ``--restart-after-s``,
``pg_ctl restart -m immediate`` of the server. At the end the
total-queue check (lost 0, duplicated 0, one chain per session in the order sent, no overlapping runs,
attempts <= 3) and how long a killed process's sessions waited to run again (max, p99). Exit 1 if a check
fails. ``--serve``: the three processes are ``nexus serve`` (the engine, its agents calling the loopback fake
provider of ``nexus.testing``: a tool call, its result, then a reply, per turn; ``_fault_serve.py``); their
runs print no events, so the check is the ledger's (a run a kill cut leaves an ``aborted`` turn there).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _machine
from _fault_serve import ServeProcess, fake_model

from nexus.ledger import Ledger
from nexus.testing import FakeProviderServer
from nexus.testing.faults import (
    QUEUE_MODES,
    BrokerProcess,
    all_finished,
    check_ledger,
    check_runs,
    register,
    requests,
    rows,
)

ROOT = Path(__file__).resolve().parents[1]


class Chaos:
    """The three brokers and the faults done to them (SIGKILL and restart, ``pg_terminate_backend``)."""

    def __init__(self, url: str, args: argparse.Namespace, logs: Path, model: FakeProviderServer | None) -> None:
        self.url, self.args, self.logs, self.model = url, args, logs, model
        self.rng = random.Random(args.seed)
        self.all: list[BrokerProcess | ServeProcess] = []
        self.live = [self._start(n) for n in range(3)]
        self.kills = self.terminations = 0

    def _start(self, slot: int) -> BrokerProcess | ServeProcess:
        env = {"PGAPPNAME": f"nexus-fault-{slot}"}
        process: BrokerProcess | ServeProcess
        if self.model is not None:  # --serve: nexus serve, the engine calling the fake provider
            process = ServeProcess(self.url, self.args.ttl_ms, self.model, self.logs, env)
        else:
            process = BrokerProcess(self.url, self.args.ttl_ms, self.args.run_s, logs=self.logs, env=env)
        self.all.append(process)
        return process

    def fault(self) -> str:
        slot = self.rng.randrange(3)
        if self.rng.random() < 0.7:
            self.live[slot].kill()  # at a random moment: mid-run, mid-claim, mid-write, idle
            self.live[slot] = self._start(slot)
            self.kills += 1
            return f"SIGKILL broker {slot}"
        ended = rows(self.url, f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                               f" WHERE application_name = 'nexus-fault-{slot}'")  # fmt: skip
        self.terminations += 1
        return f"pg_terminate_backend: {ended[0][0]} connections of broker {slot}"

    def stop(self) -> list[str]:
        """End the live brokers; the stderr of any that printed a traceback."""
        errors = []
        for process in self.live:
            _, err = process.stop()
            if "Traceback" in err:
                errors.append(err)
        return errors


def send_all(url: str, args: argparse.Namespace, done: threading.Event) -> None:
    """Accept every message, a wave (one per agent) every ``--wave-s`` seconds, through restarts."""

    async def main() -> None:
        async with await Ledger.connect(url) as ledger:
            for n, request in enumerate(requests(args.agents, args.per_agent, QUEUE_MODES)):
                await ledger.queue.accept(request)
                if n % args.agents == args.agents - 1:
                    await asyncio.sleep(args.wave_s)

    try:
        asyncio.run(main())
    finally:
        done.set()


def restart_server(folder: str) -> None:
    """``pg_ctl restart -m immediate``: the server dies without a checkpoint and recovers from its WAL."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "crash-restart", folder],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"pg_ctl restart failed: {done.stderr.strip()}")


def run(url: str, folder: str, args: argparse.Namespace) -> int:
    asyncio.run(_register(url, args.agents))
    logs = Path(tempfile.mkdtemp(prefix="nexus-fault-logs-"))
    model = fake_model() if args.serve else None
    began = time.monotonic()
    chaos = Chaos(url, args, logs, model)
    sent = threading.Event()
    sender = threading.Thread(target=send_all, args=(url, args, sent), daemon=True)
    sender.start()
    restarted = False
    while not (sent.is_set() and _finished(url)):  # faults until the last message is done
        time.sleep(chaos.rng.uniform(2, 4))
        if not restarted and time.monotonic() - began > args.restart_after_s:
            restart_server(folder)
            restarted = True
            print(f"{time.monotonic() - began:7.1f}s  pg_ctl restart -m immediate", flush=True)
        print(f"{time.monotonic() - began:7.1f}s  {chaos.fault()}", flush=True)
    sender.join()
    all_finished(url, timeout_s=600)
    elapsed = time.monotonic() - began
    errors = chaos.stop()
    if model is not None:
        model.stop()
    total = args.agents * args.per_agent
    print(f"run logs: {logs}", flush=True)
    counts = check_ledger(url, total, failed_ok=True, cut_turns_ok=args.serve)
    runs = check_runs(chaos.all)  # --serve: nexus serve prints no run events, so only the ledger's check
    shutil.rmtree(logs, ignore_errors=True)
    print(f"messages {total:,} over {args.agents} agents, modes {', '.join(QUEUE_MODES)}; {elapsed:.0f} s")
    print(f"faults: {chaos.kills} SIGKILLs, {chaos.terminations} pg_terminate_backend, "
          f"{int(restarted)} pg_ctl restart -m immediate")  # fmt: skip
    _report(url, counts, None if model is None else len(model.requests), runs)
    if errors:
        first = errors[0]
        print("a broker printed a traceback:\n" + first[first.index("Traceback") :][:3000])
    return 1 if errors else 0


def _report(url: str, counts: dict[str, int], model_calls: int | None, runs: dict[str, float]) -> None:
    """The checks' counts (and, for scripted brokers, the runs' own: ``model_calls`` is None)."""
    done = (f"lost 0, duplicated 0, chains and order kept, no overlapping runs, attempts <= 3: passed "
            f"({counts['delivered']:,} delivered, {counts['failed']} failed after 3 cut runs, "
            f"{counts['turns']:,} turns, {counts['epochs']:,} lease epochs")  # fmt: skip
    if model_calls is not None:
        tools = rows(url, "SELECT tool_name, status, count(*) FROM tool_calls GROUP BY 1, 2 ORDER BY 1, 2")
        written = ", ".join(f"{n:,} {name} {status}" for name, status, n in tools) or "none"
        print(f"{done})\nnexus serve x3, the engine on the fake provider: {model_calls:,} model calls; "
              f"tool calls written: {written}")  # fmt: skip
        return
    print(f"{done}, {runs['fenced']:.0f} runs fenced off, {runs['steered']:.0f} steers read, "
          f"{runs['aborted']:.0f} runs interrupted)")  # fmt: skip
    print(f"sessions cut by a kill: {runs['cut']:.0f}, ran again after max {runs['rerun_max_s']:.1f} s, "
          f"p99 {runs['rerun_p99_s']:.1f} s; not again {runs['rerun_missing']:.0f} (the cut run had written its "
          "turn: nothing was left to run)")  # fmt: skip


def _finished(url: str) -> bool:
    try:
        return not rows(url, "SELECT 1 FROM queue_items WHERE status IN ('queued', 'processing') LIMIT 1")
    except Exception:  # the server restarting
        return False


async def _register(url: str, agents: int) -> None:
    async with await Ledger.connect(url) as ledger:
        await register(ledger, agents)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--per-agent", type=int, default=50)
    parser.add_argument("--run-s", type=float, default=0.05, help="how long a scripted run takes")
    parser.add_argument("--ttl-ms", type=int, default=3000, help="the session lease's time to live")
    parser.add_argument("--wave-s", type=float, default=0.25, help="pause between waves of one message per agent")
    parser.add_argument("--restart-after-s", type=float, default=20, help="when the server is crash-restarted")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--keep", action="store_true", help="keep the cluster and the run logs when a check fails")
    parser.add_argument("--serve", action="store_true", help="nexus serve processes, a fake model, a tool per turn")
    args = parser.parse_args()
    print(_machine.header("fault_postgres.py: three brokers on one PostgreSQL under kills and restarts"))
    folder = tempfile.mkdtemp(prefix="nexus-fault-pg-")
    from bench_ledger_backends import start_postgres

    url = start_postgres(folder)
    if url is None:
        return 2
    kept = False
    try:
        return run(url, folder, args)
    except AssertionError:
        kept = args.keep
        raise
    finally:
        if kept:
            print(f"the database is kept for a look: {url} (scripts/postgres.sh stop {folder})")
        else:
            subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh"), "stop", folder], capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)
        print(_machine.load_line())


if __name__ == "__main__":
    sys.exit(main())
