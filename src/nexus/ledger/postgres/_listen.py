"""Wake-ups on PostgreSQL: ``LISTEN nexus_queue`` on a connection of its own, reconnected when it drops.

Brokers sharing a database find the messages other processes accepted by polling the queue; a
notification makes the next look happen now instead of up to a poll interval later. The queue sends
one only when a session becomes ready: a group commit that accepted into a session nobody holds a
lease on (idle -> ready), or a lease released over work still waiting (``_notify``). NOTIFY takes a
global lock at commit, so a busy queue (its sessions held) sends almost none.

The listening connection is not a pooled one: psycopg holds a connection while it waits for
notifications. It is never the only way to wake: a notification sent while it reconnects is lost, so
each reconnection wakes the broker once (a look catches up), and the poll stays on behind it. Behind
a transaction-pooling pgbouncer LISTEN does not work (it needs a session): turn it off there
(``[broker] wakeups = "poll"`` or ``NEXUS_PG_LISTEN=0``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from nexus.ledger.postgres._url import redacted

log = logging.getLogger("nexus.ledger")

CHANNEL = "nexus_queue"
"""The notification channel; the payload is the session label, or empty for "look at the queue"."""

RECONNECT_MAX_S = 5.0


def listening_enabled() -> bool:
    """False when ``NEXUS_PG_LISTEN`` says ``0``/``off``/``no``/``false`` (poll only)."""
    return os.environ.get("NEXUS_PG_LISTEN", "").strip().lower() not in ("0", "off", "no", "false")


class QueueListener:
    """Calls ``on_wake(session_label)`` for each notification (``""``: look at the queue) until cancelled."""

    def __init__(self, url: str) -> None:
        self._url = url

    async def listen(self, on_wake: Callable[[str], None]) -> None:
        """Listen until the task is cancelled; reconnects with a growing pause, waking once after each connect."""
        import psycopg

        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    delay = 0.1
                    on_wake("")  # anything sent while it was not listening: one look catches up
                    async for notice in conn.notifies():
                        on_wake(notice.payload)
            except psycopg.Error as exc:
                log.warning("listening for queue wake-ups on %s failed (%s); polling meanwhile, reconnecting in "
                            "%.1f s", redacted(self._url), exc, delay)  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)
