"""``nexus mcp serve``: Nexus agents for an MCP client, over stdin/stdout (docs/mcp.md).

An MCP client (Claude Desktop, Cursor…) starts this command and speaks MCP on its stdin/stdout;
nothing else is ever written to stdout (logs go to stderr). Messages go through the broker's
durable queues. If no other process drains this ``$NEXUS_HOME``, this one does (it takes the
broker lock, like ``nexus adapters monitor``) and a waiting ``send_message`` streams the reply as
progress; if ``nexus serve`` already drains it, messages are queued for that process and the reply
is read from the ledger when its turn is written. The command ends when the client closes stdin
(or on SIGTERM): runs it started are aborted and kept, queued messages stay for the next drain.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger


def mcp_serve_command(args: argparse.Namespace) -> int:
    """Run ``nexus mcp serve`` until the client closes stdin."""
    from nexus.cli._lock import drain_lock
    from nexus.cli.send_cmd import _config
    from nexus.errors import ConfigError

    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError("nexus mcp serve needs the mcp extra: pip install 'nexus-broker[mcp]'") from None
    config = _config(args)
    with drain_lock(config) as drains:
        return asyncio.run(_serve_opened(config, drains))


async def _serve_opened(config: NexusConfig, drains: bool) -> int:
    from nexus.cli.send_cmd import open_recovered

    async with open_recovered(config) as ledger:
        return await _serve(config, ledger, drains)


async def _serve(config: NexusConfig, ledger: Ledger, drains: bool) -> int:
    import signal

    from nexus.ledger import BrokerStore
    from nexus.server import ServerState, build_face

    state = ServerState(ledger, BrokerStore(ledger.database))
    host = None
    if drains:
        from nexus.broker import build_host, start_host

        host = build_host(config, ledger)
        state.broker, state.runtime, state.deliverer = host.broker, host.runtime, host.deliverer
        await start_host(config, host)
    else:
        print("nexus mcp serve: another process drains this NEXUS_HOME; messages are queued for it", file=sys.stderr)
    face = build_face(state)
    serving = asyncio.get_running_loop().create_task(face.run_stdio_async())
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, serving.cancel)
    try:
        await serving
    except asyncio.CancelledError:
        pass
    finally:
        if host is not None:
            await host.close()
    return 0
