"""A run's side of steering: the receipts it accepted, and what the turn write needs of them.

Whoever accepts a message owns it until it is delivered or handed back (``nexus.agent.steering``
settles each receipt). The run keeps three things from those settlements: the ids of the
delivered steers (written with the turn as consumed queue items, for the broker), the ``source``
of each delivered one by its position in the turn (stored on its message), and the receipts
handed back once the run was aborted or ended (listed in the result, so the caller can requeue them).
"""

from __future__ import annotations

from collections.abc import Callable

from nexus.agent import SteeringQueue, SteerMode, SteerReceipt
from nexus.engine.execution.events import SteerEvent
from nexus.engine.types import new_id
from nexus.llm import UserMessage


def steer_receipt(message: object, id: object, mode: object, source: object) -> SteerReceipt:
    """A new receipt for a steer, or ``TypeError``/``ValueError`` naming what is wrong with the arguments.

    Checked where the caller is: ``steer(None)`` was taken as pending and failed the run later (its crash
    journal, then its result), losing a reply over one bad call.
    """
    if isinstance(message, str):
        user = UserMessage(message)
    elif isinstance(message, UserMessage):
        user = message
    else:
        raise TypeError(f"steer takes a UserMessage or text, got {type(message).__name__}")
    if mode not in ("all", "one"):
        raise ValueError(f"steer mode must be 'all' or 'one', got {mode!r}")
    if id is not None and (not isinstance(id, str) or not id):
        raise TypeError(f"steer id must be a non-empty string or None, got {id!r}")
    if not isinstance(source, str):
        raise TypeError(f"steer source must be a string, got {type(source).__name__}")
    return SteerReceipt(id or new_id(), user, mode, source=source)


class RunSteering:
    """The steering queue of one run and the record of its settled receipts."""

    __slots__ = ("_ended", "_publish", "delivered_ids", "queue", "returned", "sources")

    def __init__(self, queue: SteeringQueue | None, publish: Callable[[object], None]) -> None:
        self.queue = queue if queue is not None else SteeringQueue()
        # most runs are never steered: tuples (an empty one costs nothing) and a dictionary made on first use,
        # not two empty lists and an empty dictionary (176 bytes of every run in flight)
        self.delivered_ids: tuple[str, ...] = ()
        """Ids of the steers injected into this turn: written with it as consumed queue items (broker)."""
        self.sources: dict[int, str] | None = None
        """``source`` of each steer injected into this turn, by its index in the turn (0 = the query)."""
        self.returned: tuple[SteerReceipt, ...] = ()
        """The receipts the run handed back after an abort or at its end (the result's ``returned_steers``)."""
        self._ended = False
        self._publish = publish
        self.queue.on_settle(self._settled)

    def offer(
        self,
        message: str | UserMessage,
        *,
        id: str | None,
        mode: SteerMode,
        source: str,
        aborted: str | None,
        compacting: bool,
    ) -> SteerReceipt:
        """Accept ``message`` for the next safe point, or hand it back at once.

        ``aborted`` is the abort reason once the run was aborted: the queue closes, and this steer and
        those still pending are returned and listed in the result (until the run has ended);
        ``compacting``: the run is rewriting its history and refuses steers meanwhile.
        """
        receipt = steer_receipt(message, id, mode, source)
        if aborted is not None and not self._ended:
            # aborted, not yet ended: this steer and those pending are handed back and listed in the
            # result (closing the queue here once returned the pending ones to nobody's list)
            self.returned += (*self.queue.close(f"the run was aborted: {aborted}"), self.queue.offer(receipt))
            return receipt
        if compacting:
            return self.queue.offer(receipt, refuse="the run is compacting its history")
        return self.queue.offer(receipt)

    def take(self) -> list[UserMessage]:
        """The messages for this safe point (one, or every pending ``all`` steer)."""
        return self.queue.take()

    def joined(self, message: object, position: int) -> None:
        """``message`` joined the conversation at turn index ``position``: its receipt is delivered."""
        self.queue.joined(message, position)

    def close(self, aborted: str | None) -> None:
        """The run is over: every steer not yet injected is returned (``aborted``: the abort reason, if any)."""
        if aborted is not None:
            reason = f"the run was aborted before it could inject the message: {aborted}"
        else:
            reason = "the run ended before it reached a point where it could inject the message"
        self.returned += tuple(self.queue.close(reason))
        self._ended = True  # a steer offered from now on is returned at once, after the result was built

    def detach(self) -> None:
        """The run has ended: stop listening to the queue (it may outlive the run: the listener made a cycle)."""
        self.queue.on_settle(None)

    def response_sources(self, count: int) -> list[str | None]:
        """The ``source`` of each of the turn's ``count`` response messages (``None``: not a steer)."""
        sources = self.sources
        if not sources:
            return []
        return [sources.get(i + 1) for i in range(count)]

    def _settled(self, receipt: SteerReceipt) -> None:
        """A receipt settled: remember a delivered one for the turn write, and announce it on the channel."""
        if receipt.status == "delivered":
            self.delivered_ids += (receipt.id,)
            if receipt.position is not None:
                if self.sources is None:
                    self.sources = {}
                self.sources[receipt.position] = receipt.source
        self._publish(SteerEvent(receipt))
