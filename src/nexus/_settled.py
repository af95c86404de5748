"""Awaiting a write that cannot be stopped once submitted, through a cancellation of the waiter.

The ledger's group commit and the engine's writer thread both hand a write to someone else and wait
for it: a waiter that returned at its cancellation would go on believing undone a write that commits
a moment later (a run reporting done before its turn is on disk).
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

T = TypeVar("T")


async def settled(future: asyncio.Future[T]) -> T:
    """The result of ``future``, waited for even if this task is cancelled meanwhile (as ``asyncio.shield``);
    a cancellation is re-raised once ``future`` is done."""
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():
                raise
            cancelled = True
            continue
        break
    if cancelled:
        raise asyncio.CancelledError
    return result
