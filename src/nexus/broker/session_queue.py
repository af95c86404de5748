"""One session's in-memory queue: cap and drop policies, dedupe, and what the next turn takes.

This is the broker's fast copy; the ledger's ``queue_items`` rows are the truth. The queue
never reorders: items are kept in arrival order, and an item handed to a run (steered into it,
or taken for a turn) stays in place, marked in flight, until the run either consumes it
(:meth:`SessionQueue.complete`) or hands it back (:meth:`SessionQueue.release`) — so a returned
steer is back at the front of its queue, exactly where it was.

Formats follow OpenClaw (reference/openclaw.md §1) so prompts read the same to the model:
the collect title ``[Queued messages while agent was busy]``, ``---``/``Queued #n`` blocks and
the ``[Queue overflow]`` summary. That summary is not kept here: the messages the ``summarize`` policy
drops are marked in the ledger, and the batch runner takes them into the session's next turn
(:func:`owed_summary`), whichever process runs it and across restarts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import field
from operator import attrgetter
from typing import TYPE_CHECKING, TypeVar

from nexus._dataclass import dataclass
from nexus.broker.modes import QueueMode, QueueSettings

if TYPE_CHECKING:
    from nexus.broker.types import Ticket

COLLECT_TITLE = "[Queued messages while agent was busy]"
SUMMARY_LINE_CHARS = 160
_WHITESPACE = re.compile(r"\s+")
K = TypeVar("K")
_ITEM_ID = attrgetter("item_id")


@dataclass(slots=True)
class QueuedMessage:
    """A message waiting in a session's queue (its durable row is ``queue_items.id == item_id``)."""

    item_id: str
    message_id: str
    prompt: str
    mode: QueueMode
    enqueued_at_ms: int
    debounce_ms: int = 0
    sender: str | None = None
    route: str = ""
    conversation_id: str | None = None
    hop: int = 0
    reply_to: str | None = None
    """The agent that asked without waiting: the turn's reply goes back to it as a ``worker_result``."""
    reply_session: str | None = None
    """The asker's session key when it asked from a per-sender session: the reply goes back to that session."""
    reply_deliver_to: dict[str, object] | None = None
    """The chat the asker's turn answered: the asker's turn that reads the reply answers it too."""
    deliver_to: dict[str, object] | None = None
    """The chat target the reply is delivered to (an inbound message's ``metadata.deliver_to``)."""
    max_tokens: int | None = None
    """The most tokens the model may answer this message with (``metadata.max_tokens``, a chat completion's)."""
    traceparent: str | None = None
    """Where its trace goes on (``metadata.traceparent``, its accept span's), across restarts too."""
    in_flight: bool = False
    cut_runs: int = 0
    """How many runs of it a crash cut (reloaded ``processing``): a suspect of killing its process."""
    last_attempt: bool = False
    """Its next run is the last the crash-retry limit allows: it runs alone."""
    ticket: Ticket | None = field(default=None, repr=False, compare=False)
    """The sender's side of the message (its receipt's), when this broker accepted it."""


Entry = QueuedMessage | list[QueuedMessage]
"""What a session queue's index holds under a key: the one item, or its twins (:meth:`SessionQueue.restore`), oldest
first."""


@dataclass(frozen=True, slots=True)
class AddOutcome:
    """What :meth:`SessionQueue.add` did with an incoming message."""

    accepted: bool
    duplicate_of: str | None = None
    """The item id already queued with the same message id and route (nothing was added)."""
    rejected_reason: str | None = None
    """Set when the ``new`` drop policy refused the message because the queue is full."""
    dropped: tuple[QueuedMessage, ...] = ()
    """Older items the ``old``/``summarize`` policies removed to make room."""


_ADDED = AddOutcome(accepted=True)
"""The usual outcome (added, nothing dropped): one frozen instance, not one built per message."""


@dataclass(frozen=True, slots=True)
class Batch:
    """The messages one turn consumes, and the prompt that carries them."""

    items: tuple[QueuedMessage, ...]
    prompt: str
    overflow_summary: str | None = None

    @property
    def item_ids(self) -> list[str]:
        """The queue item ids to mark delivered with the turn that ran this batch."""
        return list(map(_ITEM_ID, self.items))  # no comprehension frame: once for every run

    def with_overflow(self, summary: str) -> Batch:
        """This batch with the ``[Queue overflow]`` block first in its prompt."""
        return Batch(self.items, format_prompt(list(self.items), summary), summary)


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing may run yet: a ``collect`` batch is still inside its quiet window."""

    until_ms: int


@dataclass(slots=True)
class SessionQueue:
    """The queue of one session, in arrival order.

    Looking an item up (by item id, or by message id for dedupe) goes through dicts kept beside
    the list, and the next turn's head is found without copying the queue: every accept looks
    items up, so with list scans a session that fell behind paid more per message the longer
    its queue got, and caught up the slower for it.
    """

    overflow_owed: bool = True
    """The ledger may hold drops this session's next turn owes a ``[Queue overflow]`` summary of (the ``summarize``
    policy dropped some here, or nobody looked since this queue was made: a restart, a session another process
    ran): the batch runner looks there, once, before the next turn."""
    last_enqueued_at_ms: int = 0
    _items: list[QueuedMessage] = field(default_factory=list, init=False, repr=False)
    _by_id: dict[str, Entry] = field(default_factory=dict, init=False, repr=False)
    _by_message: dict[tuple[str, str], Entry] = field(default_factory=dict, init=False, repr=False)
    """The item under each item id and each (message id, route): nearly always one, held as it is (no list made
    and dropped for every message), but :meth:`restore` queues twins without dedupe: then a list of them, oldest
    first, and when the oldest leaves the next one answers."""
    restored: QueuedMessage | None = field(default=None, init=False, repr=False)
    """The item the last :meth:`restore` (or :meth:`add`) put in, wherever arrival order placed it; ``None`` once it
    left the queue (kept, it held its ticket and so its whole ended run for as long as the session stayed idle)."""
    _interrupts: int = field(default=0, init=False, repr=False)
    """Items (waiting or in flight) in ``interrupt`` mode: none, and the head alone decides the next turn."""

    def __len__(self) -> int:
        return len(self._items)

    @property
    def items(self) -> Sequence[QueuedMessage]:
        """Every item, waiting or in flight, oldest first (change them through the methods only)."""
        return self._items

    def waiting(self) -> list[QueuedMessage]:
        """Items not handed to a run, oldest first (what ``cap`` counts)."""
        return [item for item in self._items if not item.in_flight]

    def find(self, item_id: str) -> QueuedMessage | None:
        """The item with this queue item id, if it is still queued."""
        found = self._by_id.get(item_id)
        return found[0] if isinstance(found, list) else found

    def restore(self, message: QueuedMessage) -> None:
        """Put back an item the ledger holds (a restart, another process's accept): no cap, no dedupe.

        In arrival order (accepted time, then item id), in flight or not: a cut run's item taken over from
        a dead broker goes before the messages adopted since, not behind them (it ran after four later
        followups in the full-size fault bench). Also before a batch of later items that is only being
        claimed: when the takeover hands that batch back, the older item is its head (kept behind it, it ran
        after them: the fault bench again). :attr:`restored` names it.
        """
        items = self._items
        if not items or items[-1].enqueued_at_ms < message.enqueued_at_ms:  # the usual: the newest, at the end
            items.append(message)
        else:
            key = (message.enqueued_at_ms, message.item_id)
            at = len(items)
            while at and (items[at - 1].enqueued_at_ms, items[at - 1].item_id) > key:
                at -= 1
            items.insert(at, message)
        self.restored = message
        self._index(message)

    def retune(self, item: QueuedMessage, mode: QueueMode, debounce_ms: int) -> None:
        """Give a queued item the mode and debounce its sender's settings resolved to."""
        self._interrupts += (mode == "interrupt") - (item.mode == "interrupt")
        item.mode, item.debounce_ms = mode, debounce_ms

    def add(self, message: QueuedMessage, settings: QueueSettings) -> AddOutcome:
        """Queue ``message`` under ``settings`` (its cap and drop policy); see :class:`AddOutcome`.

        An ``interrupt`` is never refused or made room for: it is how a user stops a run going wrong (a full
        queue is when that is needed most; the ``new`` policy refused it), and its turn takes the whole backlog
        with it, so nothing waits longer for it."""
        same = self._by_message.get((message.message_id, message.route))
        if same is not None:
            return AddOutcome(accepted=False, duplicate_of=(same[0] if isinstance(same, list) else same).item_id)
        dropped: list[QueuedMessage] = []
        waiting = self.waiting() if len(self._items) >= settings.cap else []  # fewer items than the cap: room
        if waiting and len(waiting) >= settings.cap and message.mode != "interrupt":  # see below
            if settings.drop_policy == "new":
                return AddOutcome(
                    accepted=False,
                    rejected_reason=f"the queue is full ({settings.cap} messages waiting) and its drop policy is 'new'",
                )
            excess = len(waiting) - settings.cap + 1
            dropped = waiting[:excess]
            self._remove({id(item) for item in dropped})
            if settings.drop_policy == "summarize":
                self.overflow_owed = True
        self.restore(message)
        self.last_enqueued_at_ms = max(self.last_enqueued_at_ms, message.enqueued_at_ms)
        return AddOutcome(accepted=True, dropped=tuple(dropped)) if dropped else _ADDED

    def next_batch(self, now_ms: int) -> Batch | Wait | None:
        """What the next turn of an idle session takes, or when to look again, or ``None`` (empty).

        - an ``interrupt`` anywhere in the queue: everything up to it, in one turn (the backlog
          is run with it, never dropped);
        - a ``collect`` head: the run of consecutive ``collect`` items with the same route, once
          ``debounce_ms`` has passed since the last message arrived;
        - otherwise the head alone.
        """
        if self._interrupts:
            waiting = self.waiting()
            last_interrupt = max((i for i, item in enumerate(waiting) if item.mode == "interrupt"), default=-1)
            if last_interrupt >= 0:
                return self._batch(waiting[: last_interrupt + 1])
        start = self._head()
        if start is None:
            return None
        head = self._items[start]
        if head.mode != "collect":
            return self._batch([head])
        ready_at = self.last_enqueued_at_ms + head.debounce_ms
        if now_ms < ready_at:
            return Wait(until_ms=ready_at)
        return self._collect(start)

    def ready_at(self) -> int | None:
        """When :meth:`next_batch` would return a batch (``0``: now), or ``None`` when nothing waits.

        It changes nothing, so a session can wait for a run slot without taking its items out
        of reach of later messages (a steer, an interrupt, a collect that grows meanwhile).
        """
        start = self._head()
        if start is None:
            return None
        head = self._items[start]
        if head.mode != "collect":
            return 0
        if self._interrupts and any(item.mode == "interrupt" for item in self.waiting()):
            return 0
        return self.last_enqueued_at_ms + head.debounce_ms

    def _head(self) -> int | None:
        """The index of the oldest waiting item (in-flight items, a run's batch, are passed over)."""
        items = self._items
        if items and not items[0].in_flight:  # the usual look: nothing runs from this queue
            return 0
        for index, item in enumerate(items):
            if not item.in_flight:
                return index
        return None

    def _collect(self, start: int) -> Batch:
        head = self._items[start]
        taken = [head]
        for item in self._items[start + 1 :]:
            if item.in_flight:
                continue
            if item.mode != "collect" or item.route != head.route:
                break
            taken.append(item)
        return self._batch(taken)

    def mark_in_flight(self, item_ids: list[str]) -> None:
        """Hand these items to a run (they stay in place until completed or released)."""
        for item_id in item_ids:
            item = self.find(item_id)
            if item is not None:
                item.in_flight = True

    def release(self, item_ids: list[str]) -> None:
        """A run handed these items back (a returned steer, a failed start): waiting again, in place."""
        for item_id in item_ids:
            item = self.find(item_id)
            if item is not None:
                item.in_flight = False

    def complete(self, item_ids: list[str]) -> None:
        """A turn consumed these items: remove them."""
        items = self._items
        if (  # the usual turn: the head alone (a twin right behind it goes too, below)
            len(item_ids) == 1 and items and items[0].item_id == item_ids[0]
            and (len(items) == 1 or items[1].item_id != item_ids[0])
        ):  # fmt: skip
            self._unindex(items[0])
            del items[0]
            return
        wanted = set(item_ids)
        head = 0
        while head < len(items) and items[head].item_id in wanted:
            head += 1
        if head == len(wanted):  # the usual turn: the oldest items, cut off the front without a scan
            for item in items[:head]:
                self._unindex(item)
            del items[:head]
            return
        self._remove({id(item) for item in items if item.item_id in wanted})

    def clear(self) -> list[QueuedMessage]:
        """Remove every waiting item (in-flight ones belong to the run); returns what was removed."""
        removed = self.waiting()
        self._remove({id(item) for item in removed})
        return removed

    def _index(self, item: QueuedMessage) -> None:
        by_id, by_message, key = self._by_id, self._by_message, (item.message_id, item.route)
        entry = by_id.get(item.item_id)
        if entry is None:  # the usual: the item alone
            by_id[item.item_id] = item
        else:
            _add_twin(by_id, item.item_id, entry, item)
        entry = by_message.get(key)
        if entry is None:
            by_message[key] = item
        else:
            _add_twin(by_message, key, entry, item)
        self._interrupts += item.mode == "interrupt"

    def _unindex(self, item: QueuedMessage) -> None:
        """Forget ``item`` (the caller takes it out of the list). The usual key holds this item alone and goes
        at once, here: :func:`_forget`'s call, twice for every message, costs more than that lookup."""
        by_id, by_message, key = self._by_id, self._by_message, (item.message_id, item.route)
        if by_id.get(item.item_id) is item:
            del by_id[item.item_id]
        else:
            _forget(by_id, item.item_id, item)
        if by_message.get(key) is item:
            del by_message[key]
        else:
            _forget(by_message, key, item)
        self._interrupts -= item.mode == "interrupt"
        if self.restored is item:
            self.restored = None

    def _remove(self, gone: set[int]) -> None:
        """Take out the items whose ``id()`` is in ``gone``, in one pass."""
        kept: list[QueuedMessage] = []
        for item in self._items:
            if id(item) in gone:
                self._unindex(item)
            else:
                kept.append(item)
        self._items = kept

    def _batch(self, items: list[QueuedMessage]) -> Batch:
        if len(items) == 1:  # the usual turn: one message, nothing to bisect
            item = items[0]
            item.in_flight = True
            return Batch((item,), format_prompt(items, None))  # positional (items, prompt): one for every run
        items = bisect_suspects(items)
        for item in items:
            item.in_flight = True
        return Batch(items=tuple(items), prompt=format_prompt(items, None))


def bisect_suspects(items: list[QueuedMessage]) -> list[QueuedMessage]:
    """The part of a batch to run now when a crash cut its run: the first half, or the head alone at the last attempt.

    A message whose run kills its process (a tool that kills it, memory it exhausts) takes every
    batch mate with it, each crash counting an attempt for all of them: after ``max_attempts`` the
    innocent mates failed with it, never run. So a batch holding suspects (``cut_runs``) is halved
    at each retry; the halves without the culprit complete, and the culprit's half is halved again.
    A message at its last allowed attempt runs alone, so no mate ever spends its last attempt
    beside the culprit: the culprit alone uses up its attempts and fails; the rest come through.
    """
    if len(items) < 2 or not any(item.cut_runs for item in items):
        return items
    if any(item.last_attempt for item in items):
        return items[:1]
    return items[: (len(items) + 1) // 2]


def _add_twin(index: dict[K, Entry], key: K, entry: Entry, item: QueuedMessage) -> None:
    """Index ``item`` under a key that holds ``entry`` already: its twins, oldest first."""
    if isinstance(entry, list):
        entry.append(item)
    else:
        index[key] = [entry, item]


def _forget(index: dict[K, Entry], key: K, item: QueuedMessage) -> None:
    """Take ``item`` out of ``key``'s entry, by identity (twins compare equal), and the key with the last."""
    entries = index.get(key)
    if not isinstance(entries, list):  # the usual key: one item (or none)
        if entries is item:
            del index[key]
        return
    for position, entry in enumerate(entries):
        if entry is item:
            del entries[position]
            break
    if not entries:
        del index[key]


def summary_line(text: str) -> str:
    """One line standing for a dropped message: whitespace collapsed, cut to 160 chars with "…"."""
    line = _WHITESPACE.sub(" ", text).strip()
    if len(line) > SUMMARY_LINE_CHARS:
        line = line[: SUMMARY_LINE_CHARS - 1].rstrip() + "…"
    return line


def owed_summary(owed: Sequence[tuple[str, int]]) -> str | None:
    """The ``[Queue overflow]`` block for the dropped prompts a turn owes, each with the cap it was dropped under:
    every drop counted, one line for each of the latest ``cap`` (the newest drop's), ``None`` for none."""
    if not owed:
        return None
    cap = max(1, owed[-1][1])
    return overflow_summary(len(owed), [summary_line(prompt) for prompt, _ in owed[-cap:]])


def overflow_summary(count: int, lines: list[str]) -> str:
    """The ``[Queue overflow]`` block injected into the next prompt after a ``summarize`` drop."""
    noun = "message" if count == 1 else "messages"
    body = "\n".join(f"- {line}" for line in lines)
    return f"[Queue overflow] Dropped {count} {noun} due to cap.\nSummary:\n{body}"


def format_prompt(items: list[QueuedMessage], overflow: str | None) -> str:
    """The text of a turn that consumes ``items``: the prompt alone, or the collect format."""
    if len(items) == 1:
        item = items[0]
        text = item.prompt if item.sender is None else f"[Message from {item.sender}]\n{item.prompt}"
        return text if overflow is None else f"{overflow}\n\n{text}"
    parts = [COLLECT_TITLE]
    if overflow is not None:
        parts.append(overflow)
    for number, item in enumerate(items, start=1):
        sender = f" (from {item.sender})" if item.sender else ""
        parts.append(f"---\nQueued #{number}{sender}\n{item.prompt}")
    return "\n\n".join(parts)
