"""Steering with receipts: whoever accepts a message owns it until it is delivered or handed back.

A run's :class:`SteeringQueue` takes user messages while the run streams or runs tools and
hands them to the agent loop at its safe points (after a tool batch, before the next model
call). Every message gets a :class:`SteerReceipt` that ends in exactly one of two states:

- ``delivered``: the message joined the conversation (``position`` = its index in the turn);
- ``returned``: the run could not take it (it had ended, failed, was aborted, or was
  compacting) — ``reason`` says why, and the caller requeues it.

Nothing is ever silently dropped: :meth:`SteeringQueue.close` returns whatever is still
pending when the run ends, however it ends. A receipt is a boolean's replacement: a caller
that was told "accepted" and then lost the message had no way to know (the bug this fixes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import field
from typing import Literal, TypeAlias

from nexus._dataclass import dataclass
from nexus.llm import UserMessage

SteerMode: TypeAlias = Literal["one", "all"]
"""``one``: this message is injected alone at a safe point (the broker's ``queue`` mode);
``all``: it goes in together with every other pending ``all`` message (``steer`` mode)."""

SteerStatus: TypeAlias = Literal["pending", "delivered", "returned"]
"""``pending`` until the run injects it (``delivered``) or hands it back (``returned``)."""


@dataclass(slots=True, eq=False)
class SteerReceipt:
    """The fate of one steering message; ``await receipt.wait()`` until it is settled.

    ``position`` is the message's index in the run's turn (0 = the query) once delivered;
    ``reason`` says why a returned message could not be injected; ``source`` is stored with the
    delivered message in the ledger (like a query's source: who or what sent it).
    """

    id: str
    message: UserMessage
    mode: SteerMode = "all"
    status: SteerStatus = "pending"
    position: int | None = None
    reason: str | None = None
    source: str = "steer"
    _waiter: asyncio.Future[SteerReceipt] | None = field(default=None, repr=False)

    @property
    def settled(self) -> bool:
        """True once the receipt is ``delivered`` or ``returned`` (it never changes again)."""
        return self.status != "pending"

    async def wait(self) -> SteerReceipt:
        """Wait until the receipt is settled and return it."""
        if self.settled:
            return self
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._waiter)

    def _settle(self, status: SteerStatus, *, position: int | None = None, reason: str | None = None) -> None:
        if self.settled:
            return
        self.status, self.position, self.reason = status, position, reason
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(self)


class SteeringQueue:
    """The pending steers of one run, in arrival order; see the module docstring.

    ``on_settle`` is called once per receipt when it is delivered or returned (the engine
    publishes a ``steer`` event from it).
    """

    __slots__ = ("_closed", "_in_flight", "_on_settle", "_pending")

    def __init__(self, on_settle: Callable[[SteerReceipt], object] | None = None) -> None:
        # made on the first steer: most runs get none (an empty list and dictionary were ~120 bytes a run)
        self._pending: list[SteerReceipt] | None = None  # a run's steers are few: an empty deque costs 600 bytes
        self._in_flight: dict[int, SteerReceipt] | None = None  # id(message) -> receipt, handed to the loop
        self._closed: str | None = None
        self._on_settle = on_settle

    @property
    def pending(self) -> int:
        """Messages accepted and not yet delivered."""
        return len(self._pending or ()) + len(self._in_flight or ())

    def offer(self, receipt: SteerReceipt, *, refuse: str | None = None) -> SteerReceipt:
        """Accept ``receipt`` for the next safe point, or return it at once.

        It is returned when the queue is closed, or with ``refuse`` (why the run cannot take it
        now, e.g. it is compacting its history).
        """
        reason = self._closed or refuse
        if reason is not None:
            self._settle(receipt, "returned", reason=reason)
        elif self._pending is None:
            self._pending = [receipt]
        else:
            self._pending.append(receipt)
        return receipt

    def take(self) -> list[UserMessage]:
        """The messages for this safe point: the first ``one`` alone, or the leading run of ``all`` steers."""
        taken: list[UserMessage] = []
        pending = self._pending
        while pending:
            head = pending[0]
            if head.mode == "one" and taken:
                break
            pending.pop(0)
            if self._in_flight is None:
                self._in_flight = {}
            self._in_flight[id(head.message)] = head
            taken.append(head.message)
            if head.mode == "one":
                break
        return taken

    def joined(self, message: object, position: int) -> None:
        """The loop appended ``message`` to the conversation at turn index ``position``: delivered."""
        receipt = self._in_flight.pop(id(message), None) if self._in_flight else None
        if receipt is not None:
            self._settle(receipt, "delivered", position=position)

    def close(self, reason: str) -> list[SteerReceipt]:
        """No more steers: return every undelivered one (and refuse later offers) with ``reason``."""
        if self._closed is None:
            self._closed = reason
        returned = [*(self._in_flight or {}).values(), *(self._pending or ())]
        self._in_flight = self._pending = None
        for receipt in returned:
            self._settle(receipt, "returned", reason=reason)
        return returned

    def on_settle(self, listener: Callable[[SteerReceipt], object] | None) -> None:
        """Call ``listener`` once per receipt when it is delivered or returned (replaces the previous one)."""
        self._on_settle = listener

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed is not None

    def _settle(self, receipt: SteerReceipt, status: SteerStatus, **kw: object) -> None:
        receipt._settle(status, **kw)  # type: ignore[arg-type]
        if self._on_settle is not None:
            try:
                self._on_settle(receipt)
            except Exception:  # a listener must not lose the message: the receipt is already settled
                import logging

                logging.getLogger("nexus.agent").exception("steer listener raised")
