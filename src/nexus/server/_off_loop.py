"""Synchronous store calls from a route, without holding the event loop on PostgreSQL.

The broker's registry and queue rows (``BrokerStore``) answer synchronously: on SQLite a call is a short
local read and runs inline, but on PostgreSQL it waits for the server (a round trip, or a lock another
transaction holds for seconds), which would stall every stream and request of the process. There it runs
on a worker thread instead. Routes declared with ``def`` already run on FastAPI's threads; this is for
``async def`` ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from nexus.server._state import ServerState

T = TypeVar("T")


async def store_call(state: ServerState, call: Callable[[], T]) -> T:
    """``call()``: inline on SQLite, on a worker thread when the ledger is reached over the network."""
    if state.ledger.inline:
        return call()
    return await asyncio.to_thread(call)
