"""What became of the messages a command ran: the outcome of the turn that consumed each one.

A queue item is ``delivered`` once a turn consumed it — whatever that turn did: the durability
promise ("never delivered twice to a completed turn", docs/invariants.md) counts the message as
handled, and it is not run again. Whether the turn *succeeded* is the turn's own status in the
ledger. ``nexus queue drain`` and ``nexus send`` read it here so a failed turn is a failed run
(exit 1) with the reason, not a silent success.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.ledger import Ledger
    from nexus.ledger.broker_store import BrokerQueueItem, BrokerStore


@dataclass(frozen=True, slots=True)
class Failure:
    """One message whose run failed: its item, and why (the turn's error, or the item's reason)."""

    item: BrokerQueueItem
    reason: str

    def describe(self) -> str:
        """``coder (message m-1, turn 01J…): 400 invalid_request_error: …``."""
        where = f"message {self.item.message_id}"
        if self.item.turn_id:
            where += f", turn {self.item.turn_id}"
        return f"{self.item.agent_id} ({where}): {self.reason}"


def failure_of(ledger: Ledger, item: BrokerQueueItem) -> Failure | None:
    """Why ``item``'s run failed — the item ``failed``, or ``delivered`` to a ``failed`` turn — or ``None``."""
    from nexus.server._views import item_turns, turn_error_text

    if item.status == "failed":
        return Failure(item, item.error or "failed")
    turn = item_turns(ledger, [item]).get(item.turn_id or "") if item.status == "delivered" else None
    if turn is None or turn.status != "failed":
        return None
    return Failure(item, f"its turn failed: {turn_error_text(turn) or 'no reason recorded'}")


class RunLog:
    """Collects the queue items of every run a broker starts (its ``on_run`` hook), to judge them after.

    Also the items the broker failed without a run while the log was open: at its start, an item
    crashes cut ``max_attempts`` times, one of an agent no longer registered, an unreadable row. A
    drain that only failed such an item must say so, not report "draining 0 queued messages" and
    exit 0. The caller holds the broker lock, so no other process fails items meanwhile.
    """

    def __init__(self) -> None:
        from nexus.llm.types import now_ms

        self.item_ids: list[str] = []
        self.unrun_ids: list[str] = []
        self.since_ms = now_ms()

    def on_run(self, handle: EngineRunHandle) -> None:
        """Runner hook: remember the items this run starts with (messages steered into it later share its
        turn and are not counted apart)."""
        self.item_ids.extend(handle.request.item_ids)

    def failures(self, ledger: Ledger, store: BrokerStore) -> list[Failure]:
        """The items failed without a run, then the failed ones among the items of the runs seen, in the
        order they ran; :meth:`handled` then counts both."""
        ran = dict.fromkeys(self.item_ids)
        unrun = [
            item
            for item in store.items(statuses=("failed",))
            if item.id not in ran and (item.completed_at or 0) >= self.since_ms
        ]
        self.unrun_ids = [item.id for item in unrun]
        found = (failure_of(ledger, item) for item in [*unrun, *_items(store, ran)])
        return [failure for failure in found if failure is not None]

    def handled(self) -> int:
        """How many messages the runs took, and :meth:`failures` found failed without a run."""
        return len({*self.item_ids, *self.unrun_ids})


def _items(store: BrokerStore, item_ids: Iterable[str]) -> list[BrokerQueueItem]:
    return [item for item_id in item_ids if (item := store.get_item(item_id)) is not None]


def failures_line(failures: list[Failure], ran: int) -> str:
    """One line naming the failed runs: ``nexus: error: 1 of 3 drained messages failed: coder (…): reason``."""
    shown = failures[0].describe()
    more = f"; and {len(failures) - 1} more (nexus queue list --all shows each)" if len(failures) > 1 else ""
    noun = "message" if ran == 1 else "messages"
    return f"nexus: error: {len(failures)} of {ran} drained {noun} failed: {shown}{more}"
