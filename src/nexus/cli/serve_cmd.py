"""``nexus serve``: the broker and the HTTP API (docs/server.md) in one long-running process.

Refused before anything starts: a non-loopback address without a token (exit 2: anyone on the
network could drive the agents), a token that names an unset variable (exit 2), another process
already draining this ``$NEXUS_HOME``'s SQLite ledger (exit 1: a second broker would run messages twice).
A PostgreSQL ledger has no file to lock: one ``nexus serve`` per database until leases come (docs/ledger.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig, ServerConfig


def serve_command(args: argparse.Namespace) -> int:
    """Run ``nexus serve`` until SIGTERM/SIGINT."""
    from nexus.cli._lock import exclusive_broker
    from nexus.cli.send_cmd import _config
    from nexus.config import resolve_env
    from nexus.errors import ConfigError, UsageError

    try:
        import uvicorn  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError("nexus serve needs the server extra: pip install 'nexus-broker[server]'") from None
    config = _config(args)
    if args.port is not None and not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is 0-65535 (0: any free port)")
    tokens = []
    for number, token in enumerate(config.server.tokens, 1):
        value = resolve_env(token, os.environ, "[server] tokens")
        if value and (value != value.strip() or not value.isprintable()):  # a header's value arrives trimmed
            raise ConfigError(
                f"[server] tokens: token {number} has spaces at its ends or control characters, so no client "
                "could send it in an Authorization header; give a token of visible characters"
            )
        if value:
            tokens.append(value)
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
    from nexus.cli._telemetry import metrics_tokens, start_telemetry

    scraper_tokens = metrics_tokens(config)  # an unset ${VAR} stops the start here, like [server] tokens
    start_telemetry(config, args, logs=True)
    # one draining process per SQLite ledger; on PostgreSQL there is no file to lock, so the server holds
    # none, but it does not start beside a drain or a server of this machine (docs/ledger.md)
    if config.database_url is not None:
        with exclusive_broker(config):
            pass
    with exclusive_broker(config) if config.database_url is None else contextlib.nullcontext():
        from nexus.engine import tune_gc_for_many_runs

        tune_gc_for_many_runs()  # a long-lived process of many runs: freeze the startup heap, collect less often
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            quiet = getattr(args, "quiet", False)
            return runner.run(_serve(config, settings, log_requests=not quiet, metrics_tokens=scraper_tokens))


async def _serve(config: NexusConfig, settings: ServerConfig, *, log_requests: bool, metrics_tokens: list[str]) -> int:
    """Open the ledger (crashed turns closed) and serve until stopped."""
    from nexus.cli._outcomes import told_abandoned
    from nexus.cli.send_cmd import open_recovered
    from nexus.server import serve_http

    async with open_recovered(config) as ledger:
        code = await serve_http(config, ledger, settings, log_requests=log_requests, metrics_tokens=metrics_tokens)
    if told_abandoned("nexus serve", ledger):  # a silent PostgreSQL: the stop cut what it had not answered
        return code or 1
    return code


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
