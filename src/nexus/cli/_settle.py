"""``nexus send --wait`` waits for the conversation it started, not only the first reply.

A manager that delegates without waiting (``send_message_to_agent`` without ``waitForReply``) answers
"I asked the worker" at once; the real answer is its next turn, run when the worker's reply arrives
as a message. ``--wait`` gives its message a conversation id (its message id), which every message
the conversation causes carries (the delegation, the worker's reply, the manager's next turn). The
conversation has settled when none of its messages waits or runs and no ask in it awaits its reply;
then the answer is the last turn that answered the agent the user wrote to.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.ledger import BrokerStore, Ledger, QueueItem


def conversation_of(item: QueueItem) -> str | None:
    """The conversation id the item's message carries (``None``: none)."""
    message = item.message
    found = message.get("conversation_id") if isinstance(message, dict) else None
    return str(found) if found else None


@dataclass(frozen=True, slots=True)
class Pending:
    """What a conversation still waits for: messages queued or running, asks whose reply has not come."""

    running: list[QueueItem]
    awaited: list[tuple[QueueItem, str]]

    def __bool__(self) -> bool:
        return bool(self.running or self.awaited)

    def describe(self) -> str:
        """``2 messages: worker (queued: "run the tests"), lead (awaits worker's reply)``."""
        parts = [f'{item.agent_id} ({item.status}: "{_short(item.content)}")' for item in self.running]
        parts += [f"{asker} (awaits {item.agent_id}'s reply)" for item, asker in self.awaited]
        noun = "message" if len(parts) == 1 else "messages"
        return f"{len(parts)} {noun}: {', '.join(parts)}"


def pending(store: BrokerStore, conversation: str) -> Pending:
    """The conversation's unfinished business (read from the small indexes of unfinished items)."""
    running = [item for item in store.items(statuses=("queued", "processing")) if conversation_of(item) == conversation]
    awaited = [(item, asker) for item, asker in store.unanswered_replies() if conversation_of(item) == conversation]
    return Pending(running, awaited)


async def later_answers(ledger: Ledger, store: BrokerStore, first: QueueItem) -> list[tuple[str, str]]:
    """``(turn id, reply)`` of each turn after ``first``'s that answered the same agent in its conversation."""
    from nexus.broker import turn_reply

    conversation = conversation_of(first)
    if conversation is None or first.turn_id is None:
        return []
    later = _in_order(
        item
        for item in store.items(agent_id=first.agent_id, statuses=("delivered",))
        if conversation_of(item) == conversation and item.turn_id and item.turn_id != first.turn_id
    )
    seen: dict[str, str] = {}
    for item in later:
        assert item.turn_id is not None
        reply = await turn_reply(ledger, item.turn_id)
        if item.turn_id not in seen and reply:
            seen[item.turn_id] = reply
    return list(seen.items())


def _in_order(items: Iterable[QueueItem]) -> Sequence[QueueItem]:
    return sorted(items, key=lambda item: (item.completed_at or 0, item.enqueued_at))


def _short(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Unsettled:
    """``--wait`` on another broker: the item not consumed yet, or (after its first reply) the conversation it
    started still busy; says once what it waits for."""

    def __init__(self, store: Any, item_id: str, conversation: str | None) -> None:
        self.store, self.item_id, self.conversation = store, item_id, conversation
        self.told = False
        self.left: Any = None
        self.status = "queued"

    def now(self) -> bool:
        item = self.store.get_item(self.item_id)
        if item is not None and item.status in ("queued", "processing"):
            self.status = item.status
            return True
        if self.conversation is None:
            return False
        self.left = pending(self.store, self.conversation)
        if self.left and not self.told:
            self.told = True
            print(f"nexus: the first reply is in; waiting for the conversation it started: {self.left.describe()}",
                  file=sys.stderr)  # fmt: skip
        return bool(self.left)

    def what(self) -> str:
        if self.left:
            return f"still pending: {self.left.describe()}"
        if self.status == "processing":  # "stays queued" was said of a message whose turn was running
            return "its turn is running in the other process; the reply goes to the session's history when it ends"
        return "the message stays queued"
