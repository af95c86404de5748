"""What became of the messages a command ran: the outcome of the turn that consumed each one.

A queue item is ``delivered`` once a turn consumed it — whatever that turn did: the durability
promise ("never delivered twice to a completed turn", docs/invariants.md) counts the message as
handled, and it is not run again. Whether the turn *succeeded* is the turn's own status in the
ledger. ``nexus queue drain`` and ``nexus send`` read it here so a failed turn is a failed run
(exit 1) with the reason, not a silent success. A stop that a silent PostgreSQL cut short is said here
too (:func:`told_abandoned`), for every command that hosts the broker.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.ledger import BrokerStore, Ledger, QueueItem


@dataclass(frozen=True, slots=True)
class Failure:
    """One message whose run failed: its item, and why (the turn's error, or the item's reason)."""

    item: QueueItem
    reason: str

    def describe(self) -> str:
        """``coder (message m-1, turn 01J…): 400 invalid_request_error: …``."""
        where = f"message {self.item.message_id}"
        if self.item.turn_id:
            where += f", turn {self.item.turn_id}"
        return f"{self.item.agent_id} ({where}): {self.reason}"


async def failure_of(ledger: Ledger, item: QueueItem) -> Failure | None:
    """Why ``item``'s run failed — the item ``failed``, or ``delivered`` to a ``failed`` turn — or ``None``."""
    from nexus.server import item_turns, turn_error_text

    if item.status == "failed":
        return Failure(item, item.error or "failed")
    turn = (await item_turns(ledger, [item])).get(item.turn_id or "") if item.status == "delivered" else None
    if turn is None or turn.status != "failed":
        return None
    return Failure(item, f"its turn failed: {turn_error_text(turn) or 'no reason recorded'}")


class RunLog:
    """The messages a drain handled: every queue item settled since the log opened — consumed by a turn
    (whatever the turn did) or failed without one (crashes cut it ``max_attempts`` times, its agent is
    gone, its row unreadable) — in the order they were settled. The drain holds the broker lock, so no
    other process settles items meanwhile."""

    def __init__(self) -> None:
        from nexus.llm import now_ms

        self.since_ms = now_ms()
        self.handled_ids: list[str] = []

    async def failures(self, ledger: Ledger, store: BrokerStore) -> list[Failure]:
        """The failed ones among the items handled since the log opened; :meth:`handled` then counts them all."""
        since = self.since_ms
        settled = [item for item in store.items(statuses=("delivered", "failed")) if (item.completed_at or 0) >= since]
        settled.sort(key=lambda item: item.completed_at or 0)
        self.handled_ids = [item.id for item in settled]
        found = [await failure_of(ledger, item) for item in settled]
        return [failure for failure in found if failure is not None]

    def handled(self) -> int:
        """How many messages the drain handled (known after :meth:`failures`)."""
        return len(self.handled_ids)


def failures_line(failures: list[Failure], ran: int) -> str:
    """One line naming the failed runs: ``nexus: error: 1 of 3 drained messages failed: coder (…): reason``."""
    shown = failures[0].describe()
    more = f"; and {len(failures) - 1} more (nexus queue list --all shows each)" if len(failures) > 1 else ""
    noun = "message" if ran == 1 else "messages"
    return f"nexus: error: {len(failures)} of {ran} drained {noun} failed: {shown}{more}"


def told_abandoned(command: str, ledger: Ledger) -> bool:
    """Say what the stop of ``command`` gave up on, if a silent PostgreSQL left transactions unanswered by the
    stop's deadline (:attr:`Ledger.abandoned`: their connections were cut); ``True`` if so, and the command then
    exits non-zero. Called once the ledger is closed (its close may cut more)."""
    if not ledger.abandoned:
        return False
    print(
        f"{command}: stopped, but the ledger database did not answer by the stop's deadline: abandoned "
        f"{len(ledger.abandoned)} transaction(s) on the wire; nothing of them was committed, and the next start "
        "runs again the messages they held",
        file=sys.stderr,
        flush=True,
    )
    return True
