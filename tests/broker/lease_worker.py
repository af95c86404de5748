"""A broker process for the lease tests: an ``AgentBroker`` under session leases on a shared ledger.

    python lease_worker.py TARGET TTL_MS RUN_S [POLL_MS [WAKEUPS]]

``TARGET`` is an SQLite file or a ``postgresql://`` URL whose agents are registered already. Runs are
scripted (:class:`nexus.testing.broker_runtime.ScriptedRuntime`): each takes ``RUN_S`` seconds, then writes
its turn consuming its queue items, as the engine does. It prints ``ready`` once the broker has started,
then one JSON line per run (``start``, ``end`` with the outcome) on stdout; it runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any, cast

from nexus.broker import BrokerSettings, QueueSettings
from nexus.testing.broker_runtime import serve_broker


def _say(event: str, fields: dict[str, object]) -> None:
    print(json.dumps({"pid": os.getpid(), "t": time.time(), "event": event, **fields}), flush=True)


async def main(target: str, ttl_ms: int, run_s: float, poll_ms: int, wakeups: str) -> None:
    settings = BrokerSettings(
        queue=QueueSettings(mode="followup"), leases=True, lease_ttl_ms=ttl_ms, poll_ms=poll_ms,
        wakeups=cast(Any, wakeups),
    )  # fmt: skip
    await serve_broker(target, settings, run_s, _say)


if __name__ == "__main__":
    extra = sys.argv[4:]
    poll_ms = int(extra[0]) if extra else 250
    asyncio.run(
        main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), poll_ms, extra[1] if len(extra) > 1 else "notify")
    )
