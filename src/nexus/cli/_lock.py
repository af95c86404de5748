"""The broker lock as the commands that host the broker take it: refused with one line when held.

``nexus serve``, ``nexus adapters monitor`` and ``nexus queue drain`` each drain every queue of
this ``$NEXUS_HOME``; a second one beside a running one would run messages twice, so each
refuses to start (exit 1) with the same message, naming what to stop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.config import NexusConfig

LOCK_HELD = (
    "another process already drains this NEXUS_HOME (broker.lock is held by a running nexus serve, "
    "nexus adapters monitor or nexus queue drain); stop it first"
)


@contextmanager
def drain_lock(config: NexusConfig) -> Iterator[bool]:
    """Hold the broker lock for the block; yields False (holding nothing) when another process drains.

    A ``nexus serve`` on a PostgreSQL ledger holds no lock (there is no file to guard, and several servers
    may come to share a database): on this machine it is known by its ``server.json`` instead, and a
    command that would drain leaves the work to it.
    """
    from nexus.broker import broker_lock

    with broker_lock(config) as held:
        yield held and not (config.database_url is not None and _server_announced(config))


def _server_announced(config: NexusConfig) -> bool:
    from nexus.server import find_server

    return find_server(config) is not None


@contextmanager
def exclusive_broker(config: NexusConfig) -> Iterator[None]:
    """Hold the broker lock for the block; a :class:`~nexus.errors.NexusError` (exit 1) when another process drains."""
    from nexus.errors import NexusError

    with drain_lock(config) as held:
        if not held:
            raise NexusError(LOCK_HELD)
        yield
