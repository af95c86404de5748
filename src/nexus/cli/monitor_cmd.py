"""``nexus adapters monitor``: the broker with its inbound chat routing, without the HTTP API.

Like ``nexus serve`` (which does the same beside its API), it takes the broker lock, starts the
broker (reloading and draining every pending queue), then runs the ``monitor`` of every enabled
account with ``monitor = true``: each inbound message goes to the account's agent in the
sender's own session, and the reply goes back to the same chat (docs/adapters.md). It runs until
SIGTERM or SIGINT; active runs are then aborted and kept, queued messages stay for the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.broker import InboundRouter
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger


def monitor_command(args: argparse.Namespace) -> int:
    """Run ``nexus adapters monitor`` until SIGTERM/SIGINT."""
    from nexus.broker import inbound_routes
    from nexus.cli._lock import exclusive_broker
    from nexus.cli.send_cmd import _config
    from nexus.errors import ConfigError

    config = _config(args)
    if not inbound_routes(config.adapters):
        raise ConfigError(
            "no enabled adapter account has monitor = true; enable one with "
            "`nexus adapters enable NAME/ACCOUNT --monitor --agent ID`"
        )
    from nexus.config import credential_problems

    unset = credential_problems(config.adapters, os.environ, monitored_only=True)
    if unset:  # its monitor would start without its token, fail, and leave nothing monitored
        raise ConfigError("cannot monitor " + "; ".join(unset))
    with exclusive_broker(config):
        return asyncio.run(_run(config))


async def _run(config: NexusConfig) -> int:
    from nexus.cli._outcomes import told_abandoned
    from nexus.cli.send_cmd import open_recovered

    async with open_recovered(config) as ledger:
        code = await _monitor(config, ledger)
    if told_abandoned("nexus adapters monitor", ledger):  # a silent PostgreSQL: the stop cut what it had not
        return code or 1  # answered (it said "stopping" and exited 0)
    return code


async def _monitor(config: NexusConfig, ledger: Ledger) -> int:
    from nexus.broker import build_host, inbound_routes, start_host

    host = build_host(config, ledger, monitors=True)  # each reply is recorded with its turn
    inbound = host.inbound
    assert inbound is not None  # monitor_command checked that there are routes
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await start_host(config, host)
        for route in inbound_routes(config.adapters):
            agent = route.agent or "nobody (no agent configured: its messages are skipped)"
            if route.agent is not None and host.broker.get_agent(route.agent) is None:
                agent = f"{route.agent} (not a registered agent: its messages are skipped; `nexus agents add`)"
            print(f"nexus adapters monitor: {route.adapter}/{route.account_id} -> {agent}", file=sys.stderr)
        print("nexus adapters monitor: running (Ctrl-C or SIGTERM stops)", file=sys.stderr, flush=True)
        if await _until_stopped(stop, inbound):
            return 1
        print(
            f"nexus adapters monitor: stopping (active runs are aborted and kept); {inbound.accepted} inbound "
            f"message(s) queued, {inbound.duplicates} already seen (not run again)",
            file=sys.stderr,
            flush=True,
        )
    finally:
        await host.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0


async def _until_stopped(stop: asyncio.Event, inbound: InboundRouter) -> bool:
    """Wait for SIGTERM/SIGINT; ``True`` (and say so) when every monitor ended first: nothing is monitored any more
    (an adapter that kept failing: its restarts are used up), so running on would only look like working."""
    stopped = asyncio.ensure_future(stop.wait())
    monitors = asyncio.ensure_future(inbound.wait_monitors())
    await asyncio.wait({stopped, monitors}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    monitors.cancel()
    if stop.is_set():
        return False
    print(
        "nexus adapters monitor: error: every monitor has stopped (see the lines above: "
        "`nexus adapters health` says why); nothing is monitored, so it exits",
        file=sys.stderr,
        flush=True,
    )
    return True
