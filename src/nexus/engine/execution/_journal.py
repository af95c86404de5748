"""The crash journal of one run: what a ``kill -9`` must not lose, written as the run goes.

Every journal write goes through :class:`TurnJournal`, in the order the run produced it, so
``recover()`` rebuilds the turn in the right order:

- the assistant message being streamed: a snapshot (text and thinking so far, tool calls only
  once complete) is written ``interval_s`` after the last one (or after the message started;
  up to ``TICK_S`` later: planned snapshots share loop timers, ``_snapshot_clock``), or as soon
  as ``chunk_chars`` characters of new text arrived, whichever comes first - but never sooner
  than ``GAP_FACTOR`` times what the last write took, so a reply of megabytes is not copied
  every 2 KB. It is ONE entry per message that each write replaces
  (``Ledger.journal_partial``). The snapshot is taken on the event loop (a shallow copy); the
  write itself runs on the engine's ledger writer thread (``nexus.engine.execution._writer``), one at a
  time per run, so the stream never waits for SQLite. Deltas that arrive meanwhile are
  coalesced into the next write;
- the message when it ends: queued at once when it has tool calls, and the run awaits it
  (:meth:`TurnJournal.drain`) before they run. A text-only reply is held back and written
  only if something else is journaled after it: when it is the run's last message,
  ``write_turn`` follows at once and writing it first would cost a transaction (and for a
  long reply, a copy of all its text) per turn. A crash in between loses at most the last
  ``interval_s`` of it (its last snapshot is kept);
- steering/follow-up user messages and each finished tool call with its result.

Every write runs on the one writer thread, in the order it was queued; the event loop never
waits for SQLite nor for the ledger's connection lock (the run awaits :meth:`TurnJournal.drain`
where an entry must be on disk before the run goes on).

Journal writes are best effort: a failure (database busy, disk full) is reported once per run
as one warning line (no traceback: it is not a bug) and the run goes on; the final
``write_turn`` still records everything (or, if it fails too, saves the outcome to a rescue
file, see ``nexus.ledger._rescue``). A journal write waits for a busy database at most
``JOURNAL_WAIT_S`` (``nexus.ledger._lifecycle``), so a database held by another process does not
stall the stream.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import fields, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, cast

from nexus._settled import Unstoppable, settled
from nexus.engine.execution._snapshot_clock import clock_of
from nexus.engine.execution._snapshots import SNAPSHOTS
from nexus.engine.execution._writer import inline_ok, submit
from nexus.ledger import JournalEntry, JournalMessage, JournalReply, JournalToolCall
from nexus.llm import (
    AssistantContent,
    AssistantMessage,
    Cost,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)

if TYPE_CHECKING:
    from nexus.ledger import Ledger

log = logging.getLogger("nexus.engine")

PARTIAL_INTERVAL_S = 0.25
"""Longest time new streamed text waits before its snapshot is journaled."""

PARTIAL_CHUNK_CHARS = 2048
"""New text and thinking characters that trigger a snapshot before ``PARTIAL_INTERVAL_S`` has passed."""


GAP_FACTOR = 10.0
"""Snapshots of one reply are at least this many times the last write's duration apart."""

MAX_GAP_S = 2.0
"""The cost-based gap never delays a snapshot by more than this (a reply of many megabytes)."""


def snapshot(partial: AssistantMessage, complete_calls: tuple[int, ...]) -> AssistantMessage:
    """A copy of a streaming message that later deltas do not change; unfinished tool calls left out.

    Taken on the event loop for every snapshot of every run (4,000 a second with 1,000 runs), so
    each object is copied by one C call that reads all its fields and the class's own ``__init__``
    (:func:`_copier`), not through ``dataclasses.replace`` nor a Python loop over the fields.
    """
    content: list[AssistantContent] = [
        _COPY[type(block)](block)
        for i, block in enumerate(partial.content)
        if not isinstance(block, ToolCall) or i in complete_calls
    ]
    usage = _copy_usage(partial.usage)
    usage.cost = _copy_cost(partial.usage.cost)
    message = _copy_message(partial)
    message.content = content
    message.usage = usage
    return message


_T = TypeVar("_T")


def _copier(cls: type[_T]) -> Callable[[_T], _T]:
    """A shallow copy of ``cls``'s instances: ``cls(*values)``, its fields read by one ``attrgetter``.

    4-5 times cheaper than a Python loop of ``getattr``/``setattr`` over the fields. Valid because
    every field of these classes is a positional ``__init__`` parameter in field order, and none has
    a ``__post_init__`` (checked here, so a class that changes fails at import, not in a snapshot); and
    each has two fields or more (``attrgetter`` of one name returns the value, not a tuple).
    """
    found = fields(cast(Any, cls))  # a dataclass (fields raises otherwise)
    if len(found) < 2 or hasattr(cls, "__post_init__") or any(not f.init or f.kw_only for f in found):
        raise TypeError(f"{cls.__qualname__}: a snapshot copies it through __init__, which must take every field")
    read = attrgetter(*(f.name for f in found))
    return lambda obj: cls(*read(obj))


_copy_message = _copier(AssistantMessage)
_copy_usage = _copier(Usage)
_copy_cost = _copier(Cost)
_COPY: dict[type, Callable[[AssistantContent], AssistantContent]] = {
    cls: _copier(cls) for cls in (TextContent, ThinkingContent, ToolCall)
}


def _unfinished_call(block: AssistantContent, complete_ids: tuple[str, ...]) -> bool:
    """A tool call whose arguments never finished streaming."""
    return isinstance(block, ToolCall) and block.id not in complete_ids


def _says_something(block: AssistantContent) -> bool:
    """A tool call, or a text/thinking block with some text (a just-opened block has none)."""
    return isinstance(block, ToolCall) or bool(getattr(block, "text", "") or getattr(block, "thinking", ""))


class TurnJournal:
    """The journal writer of one open turn (see the module docstring); used from the event loop."""

    def __init__(
        self,
        ledger: Ledger,
        turn_id: str,
        *,
        interval_s: float | None = None,
        chunk_chars: int | None = None,
    ) -> None:
        self.ledger = ledger
        self.turn_id = turn_id
        self.interval_s = PARTIAL_INTERVAL_S if interval_s is None else interval_s
        self.chunk_chars = PARTIAL_CHUNK_CHARS if chunk_chars is None else chunk_chars
        self.loop = asyncio.get_running_loop()
        self.slot = -1  # the assistant message being streamed (0, 1, ... within the turn)
        self.live: AssistantMessage | None = None
        # content indices and ids of the live message's finished tool calls; tuples, as ``written``: a run has few,
        # and an empty set costs 216 bytes (three of them were 650 bytes of every streaming run)
        self.complete_calls: tuple[int, ...] = ()
        self.complete_ids: tuple[str, ...] = ()
        self.new_chars = 0
        self.dirty = False
        self.last_at = 0.0
        self.clock = clock_of(self.loop)  # fires the planned snapshot (one loop timer per tick for all runs)
        self.tick: int | None = None  # the clock's tick of the planned snapshot; None: none planned
        self.timer_due = 0.0
        self.gap = 0.0  # least time between two snapshots, from what the last write cost (set by the worker)
        self.in_flight = False
        self.held: tuple[int, AssistantMessage] | None = None  # an ended text reply not written yet
        self.pending: Unstoppable[None] | None = None  # the last queued entry write (see drain)
        # Every write holds ``lock``, so writes never interleave and the worker's check-then-write
        # is atomic. ``ended`` (the last ended slot: its snapshots not yet started are void) is set
        # by the loop without the lock: a snapshot already past the check is still overwritten by
        # the slot's final write or by ``write_turn``, which both come after it (they take the lock).
        self.lock = threading.Lock()
        self.written: tuple[int, ...] = ()  # the slots written (replaced, not changed: read by tests only)
        self.ended = -1
        self.closed = False
        self.failures = 0

    # ------------------------------------------------------------------ the streamed message

    def start(self, message: AssistantMessage) -> None:
        """An assistant message starts streaming: it gets the next slot."""
        self.release_held()
        self.cancel_timer()
        self.slot += 1
        self.live = message
        self.complete_calls = ()
        self.complete_ids = ()
        self.new_chars = 0
        self.dirty = False
        self.last_at = time.monotonic()

    def grew(self, chars: int) -> None:
        """``chars`` new characters of text or thinking streamed (called per delta: kept cheap)."""
        self.new_chars += chars
        self.dirty = True
        if self.in_flight:
            return  # coalesced: looked at again when the write in progress finishes
        if self.new_chars >= self.chunk_chars:
            self.schedule(self.gap)
        elif self.tick is None:
            self.schedule(max(self.interval_s, self.gap))

    def call_done(self, content_index: int, call_id: str) -> None:
        """The tool call at ``content_index`` of the live message is complete: snapshots may carry it."""
        self.complete_calls += (content_index,)
        self.complete_ids += (call_id,)
        self.dirty = True
        if not self.in_flight:
            self.schedule(max(self.interval_s, self.gap))

    def schedule(self, wait: float) -> None:
        """Snapshot ``wait`` seconds after the last one (now, if that has passed); the earlier plan wins."""
        if self.live is None:
            return
        due = self.last_at + wait
        if self.tick is not None:
            if self.timer_due <= due:
                return
            self.tick = None
        if due <= time.monotonic():
            self.kick()
        else:
            self.clock.plan(self, due)
            self.timer_due = due

    def end(self, message: AssistantMessage) -> None:
        """The message ended: a tool-calling one is written now, a text reply held back (module docstring)."""
        self.cancel_timer()
        self.live = None
        self.ended = self.slot  # snapshots of this slot not yet started are void now
        if message.stop_reason in ("aborted", "error") and message.tool_calls:
            done = self.complete_ids  # a stream cut inside a tool call: keep only the complete ones
            message = replace(message, content=[b for b in message.content if not _unfinished_call(b, done)])
        if message.tool_calls:
            slot = self.slot
            self.queue(lambda: self.write_final(slot, message))  # the run drains it before the tools run
        elif message.content:
            self.held = (self.slot, message)

    def due(self) -> None:
        """The clock: a snapshot is due and new content is waiting."""
        self.tick = None
        if self.dirty and not self.in_flight and self.live is not None:
            self.kick()

    def kick(self) -> None:
        """Take a snapshot now and write it in a worker thread."""
        live = self.live
        assert live is not None
        self.cancel_timer()
        self.dirty = False
        self.new_chars = 0
        self.last_at = time.monotonic()
        snap = snapshot(live, self.complete_calls)
        if not any(_says_something(b) for b in snap.content):
            return  # only empty blocks so far
        self.in_flight = True
        SNAPSHOTS.add(self, self.slot, snap)  # written with other runs' snapshots in one transaction

    def write_snapshot(self, slot: int, message: AssistantMessage) -> None:
        """Upsert the slot's entry on its own unless the message ended or the run closed meanwhile."""
        with self.lock:
            if self.closed or slot <= self.ended:
                return
            began = time.perf_counter()
            self.write_one(slot, message)
            self.wrote(time.perf_counter() - began)

    def write_one(self, slot: int, message: AssistantMessage) -> None:
        """Writer thread, ``lock`` held: upsert the slot's entry (a failure is reported, never raised)."""
        try:
            self.journal_now(JournalReply(self.turn_id, slot, message))
        except Exception as exc:
            self.failed("journal_partial", exc)
        else:
            self.written += (slot,)

    def journal_now(self, entry: JournalEntry) -> None:
        """Write one journal entry here (the writer thread, or the loop on SQLite when few runs are active)."""
        self.ledger.run_here(lambda here: here.turns.journal([entry]))

    def wrote(self, seconds: float) -> None:
        """A snapshot write took ``seconds``: a long reply costs more to copy each time, so keep the
        writer busy with this run at most ~1/GAP_FACTOR of the time."""
        self.gap = min(GAP_FACTOR * seconds, MAX_GAP_S)

    def snapshot_written(self) -> None:
        """Loop: the snapshot was written; text that arrived meanwhile gets its turn."""
        self.in_flight = False
        if not self.dirty or self.live is None:
            return
        self.schedule(self.gap if self.new_chars >= self.chunk_chars else max(self.interval_s, self.gap))

    def write_final(self, slot: int, message: AssistantMessage) -> None:
        """Write an ended message into its slot (synchronously, before anything after it)."""
        with self.lock:
            if self.closed:
                return
            try:
                self.journal_now(JournalReply(self.turn_id, slot, message, complete=True))
            except Exception as exc:
                self.failed("journal_partial", exc)
            else:
                self.written += (slot,)

    def release_held(self) -> None:
        """Something comes after a held-back reply: write the reply first, to keep the order."""
        if self.held is not None:
            slot, message = self.held
            self.held = None
            self.queue(lambda: self.write_final(slot, message))

    def queue(self, write: Callable[[], None]) -> None:
        """Queue one entry write on the writer thread (after every write queued before it); inline when alone."""
        if inline_ok() and self.ledger.inline:
            write()
        else:
            self.pending = submit(write)

    async def drain(self) -> None:
        """Wait until every entry queued so far is written (before tools run, before the next call)."""
        pending, self.pending = self.pending, None
        if pending is not None:
            await settled(pending)

    def cancel_timer(self) -> None:
        """Drop a planned snapshot (the clock skips a plan whose tick the journal no longer holds)."""
        self.tick = None

    # ------------------------------------------------------------------ other entries

    def message(self, message: Message) -> None:
        """Journal a whole message (an injected user message)."""
        self.release_held()
        self.queue(
            lambda: self.guarded("journal_message", lambda: self.journal_now(JournalMessage(self.turn_id, message)))
        )

    def tool_call(
        self, call: ToolCall, result: ToolResultMessage, started_at: int, completed_at: int, spawned: str | None
    ) -> None:
        """Journal a finished tool call with its result."""
        self.release_held()
        self.queue(
            lambda: self.guarded(
                "journal_tool_call",
                lambda: self.journal_now(
                    JournalToolCall(self.turn_id, call, result, started_at, completed_at, spawned)
                ),
            )
        )

    def guarded(self, what: str, action: Callable[[], object]) -> None:
        """Run one synchronous journal write; a failure is logged, never raised."""
        with self.lock:
            if self.closed:
                return
            try:
                action()
            except Exception as exc:
                self.failed(what, exc)

    def failed(self, what: str, exc: Exception) -> None:
        """Report a failed journal write: one warning line for the run's first, debug lines for the rest.

        A full disk or a database held by another process fails every write of the run; a
        line (let alone a traceback) for each would bury the reply. An exception that is not a
        ``LedgerError`` is a bug, so its traceback goes to the debug log.
        """
        from nexus.ledger import LedgerError

        self.failures += 1
        unexpected = not isinstance(exc, LedgerError)
        if self.failures == 1:
            log.warning(
                "could not write the crash journal of turn %s (%s: %s); the run goes on, and later journal failures "
                "of this run are not reported",
                self.turn_id,
                what,
                exc if not unexpected else f"{type(exc).__name__}: {exc}",
            )
        log.debug("ledger %s failed for turn %s (%d so far)", what, self.turn_id, self.failures, exc_info=unexpected)

    def stop(self) -> None:
        """Loop: the run is about to write its turn; no new snapshot is planned from now on."""
        self.cancel_timer()
        self.live = None
        self.held = None
        self.pending = None

    def close(self) -> None:
        """The run writes its turn now: stop journaling (waits for a write in progress).

        Called on the writer thread right before ``write_turn`` (after :meth:`stop` on the loop),
        or on the loop by a run that is cancelled.
        """
        self.live = None
        self.held = None
        with self.lock:
            self.closed = True
