"""One object per event loop, made on first use and gone with its loop.

The ledger writer's hand-over, the crash journal's snapshot clock and the scripted model's pacing clock each
keep one shared object per loop (one loop timer or one wakeup for all the runs on it). A loop is the key of a
weak mapping, so a closed, dropped loop takes its object with it. The getter runs once per write or per
stream: a closure with the mapping's ``get`` bound, not a class with ``__call__``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def per_loop(make: Callable[[asyncio.AbstractEventLoop], T]) -> Callable[[asyncio.AbstractEventLoop], T]:
    """A getter of the ``make(loop)`` of each loop, made when the loop first asks (on that loop's thread)."""
    made: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()
    found_for = made.get

    def of(loop: asyncio.AbstractEventLoop) -> T:
        found = found_for(loop)
        if found is None:
            found = made[loop] = make(loop)
        return found

    return of
