"""Awaiting a write that cannot be stopped once submitted, through a cancellation of the waiter.

The ledger's group commit and the engine's writer thread both hand a write to someone else and wait
for it: a waiter that returned at its cancellation would go on believing undone a write that commits
a moment later (a run reporting done before its turn is on disk).

The write's future refuses ``cancel()`` (:class:`Unstoppable`), so a task cancelled while awaiting it
keeps waiting: ``Task.cancel`` finds its waiter refusing and marks the task instead, and the task
hears ``CancelledError`` when the future is done. That is ``asyncio.shield``'s guarantee without its
second future, its callback and the extra round of the event loop they cost every wait (a broker's
turn write is one a message).
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

T = TypeVar("T")


class Unstoppable(asyncio.Future[T]):
    """A future that cannot be cancelled: only its result or exception ends it (see the module docstring)."""

    __slots__ = ()

    def cancel(self, msg: Any | None = None) -> bool:
        """Refused: the work behind this future goes on, and so does the task awaiting it."""
        return False


def unstoppable() -> Unstoppable[Any]:
    """A new :class:`Unstoppable` of the running loop."""
    return Unstoppable(loop=asyncio.get_running_loop())


async def settled(future: Unstoppable[T]) -> T:
    """The result of ``future``, waited for even if this task is cancelled meanwhile; the cancellation is raised
    once ``future`` is done. If it failed, its error is raised instead: a caller told only "cancelled" would not
    know its write failed (a turn write's rescue file is written on that error)."""
    error: BaseException | None = None
    try:
        return await future
    except asyncio.CancelledError:
        if future.done() and not future.cancelled():
            error = future.exception()
        if error is None:
            raise
    raise error  # outside the handler: the error's context stays its own
