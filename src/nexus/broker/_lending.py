"""A run's seat among ``max_concurrent``, lent back while the run waits on another agent.

A run that asks another agent and waits (``send_message_to_agent`` with ``waitForReply``, ``spawn_agent``)
does no work until the reply comes, and the reply needs a seat of its own: kept, the seat made the
cap a deadlock (``max_concurrent`` askers waiting on agents that could never start; a sub-agent chain
deeper than the cap). So the asking run lends its seat while it waits and takes one again, ahead of
every batch and run waiting in line, when its wait ends. It stays its session's run all along (busy,
steerable, abortable); only the count of runs doing work, which the cap bounds, leaves it.

The seat is found through the context: the engine runs the tools and knows nothing of the broker's
seats, and the run's task is started by the worker (or the run beside the queues) that holds the
seat, so it inherits the :data:`HELD_SEAT` that holder set. A wait from anywhere else (``nexus send
--wait``, an HTTP handler) finds none and lends nothing.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar


class Seat:
    """One seat as its holder (a worker, a run beside the queues) has it: held, lent, or wanted back."""

    __slots__ = ("back", "lent", "owner", "returning", "waits")

    def __init__(self, owner: object) -> None:
        self.owner = owner
        """The scheduler whose seat this is (a wait through another broker lends nothing of it); ``None`` once
        retired: its holder took it back from a wait that outlived its run."""
        self.waits = 0
        """Waits on other agents under way (a run may call two waiting tools at once: one loan for both)."""
        self.lent = False
        """Not counted among the runs doing work (lent, or wanted back and waiting for a free seat)."""
        self.returning = False
        """Its waits are over and it waits in line for a seat again (ahead of new batches)."""
        self.back: asyncio.Future[None] | None = None
        """Set when the seat is given back, for a holder that awaits it."""


class Lending:
    """One wait on another agent under a lent seat: ended once, by the reply or by the waiter itself."""

    __slots__ = ("over", "seat")

    def __init__(self, seat: Seat) -> None:
        self.seat = seat
        self.over = False


HELD_SEAT: ContextVar[Seat | None] = ContextVar("nexus_broker_held_seat", default=None)
"""The seat of the run this context belongs to (set by the seat's holder before it starts the run)."""
