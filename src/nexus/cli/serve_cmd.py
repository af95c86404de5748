"""``nexus serve``: the broker and the HTTP API (docs/server.md) in one long-running process.

Refused before anything starts: a non-loopback address without a token (exit 2: anyone on the
network could drive the agents), a token that names an unset variable (exit 2), another process
already draining this ``$NEXUS_HOME`` (exit 1: a second broker would run messages twice).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
from collections.abc import Callable


def serve_command(args: argparse.Namespace) -> int:
    """Run ``nexus serve`` until SIGTERM/SIGINT."""
    from nexus.cli._lock import exclusive_broker
    from nexus.cli.send_cmd import _config, _open_ledger
    from nexus.config._env import resolve_env
    from nexus.errors import ConfigError

    try:
        import uvicorn  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError("nexus serve needs the server extra: pip install 'nexus-broker[server]'") from None
    config = _config(args)
    if args.port is not None and not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: a port is 0-65535 (0: any free port)")
    tokens = [value for token in config.server.tokens if (value := resolve_env(token, os.environ, "[server] tokens"))]
    settings = config.server.model_copy(
        update={
            "host": args.host or config.server.host,
            "port": config.server.port if args.port is None else args.port,
            "tokens": tokens,
        }
    )
    if not tokens and not is_loopback(settings.host):
        raise ConfigError(
            f"refusing to listen on {settings.host} without a token: anyone who reaches it could drive your "
            'agents. Set [server] tokens = ["${NEXUS_TOKEN}"] in nexus.toml (and export NEXUS_TOKEN), '
            "or listen on 127.0.0.1"
        )
    from nexus.server.serve import serve

    with _open_ledger(config) as ledger, exclusive_broker(config):
        from nexus.engine.wiring.gc_tuning import tune_gc_for_many_runs

        tune_gc_for_many_runs()  # a long-lived process of many runs: freeze the startup heap, collect less often
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(serve(config, ledger, settings, log_requests=not getattr(args, "quiet", False)))


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (the ``server`` extra brings it), else the standard one.

    Measured with ``bench/bench_server.py --uvloop`` on a quiet machine: p99 of an accepted
    message 14.9 ms instead of 30.5 ms, the same throughput.
    """
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
