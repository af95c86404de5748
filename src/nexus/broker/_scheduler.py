"""Which session runs next: a line of ready sessions served by at most ``max_concurrent`` workers.

Each session runs one batch at a time; the broker-wide cap bounds how many run at once. The
first design gave every session its own drain task and made them take turns on a semaphore:
with more ready sessions than slots, every batch paid a semaphore wait (a future and a
loop iteration to hand the slot over) and a task per session that went idle and busy again.
Here a worker that finishes a batch takes the next session in line itself, in the same
iteration, and its own session goes to the back of the line when it has more: the same
round-robin fairness (no session keeps a slot while others wait), fewer hand-overs
(docs/benchmarks.md, the broker queue path).

A session is in at most one place: in line (``scheduled``), held by a worker (``active``), or
waiting on a timer (its ``collect`` quiet window, or the pause after a failed batch). Items stay
in the session's queue until a worker takes the batch, so they can be steered or cleared while
the session waits its turn.

Runs the broker starts beside the queues (a chat completion in a session other than its agent's
own, :mod:`nexus.broker._beside`) take a seat among the same ``max_concurrent``: the cap covers
every run of the broker, and a worker hands its seat to such a run waiting after its batch.

A run that waits on another agent lends its seat back meanwhile (:mod:`nexus.broker._lending`): the
cap counts runs doing work, so askers waiting on workers cannot hold every seat the workers need. When
its wait ends it takes a seat again before any batch or run in line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from nexus.broker._lending import HELD_SEAT, Lending, Seat
from nexus.broker._slot import AgentSlot, SessionSlot

log = logging.getLogger("nexus.broker")

Step = Callable[[AgentSlot, SessionSlot], Awaitable[None]]
"""Run one batch of the session (what its queue says is next), holding a worker."""

RETRY_AFTER_S = 1.0
"""How long a session whose batch failed (a locked or full database, a bug) waits before it is tried again."""


REPEAT_NOTICE_S = 60.0
"""A full or held database is said once, then at most this often while it lasts."""


class FailureNotices:
    """How failed batches are logged: a bug with its traceback each time; a known condition of the database
    (full disk, held by another process) as one line, said again at most every :data:`REPEAT_NOTICE_S`.

    Every session's batch is tried again each second: on a full disk that logged a 40-line traceback a
    second (a night of it is millions of lines, on a log that may share the full disk).
    """

    def __init__(self) -> None:
        self.lasting: dict[str, tuple[float, int]] = {}
        """Known conditions seen: when each was last said, and the failed batches since (not said)."""

    def failed(self, agent_id: str, label: str, exc: Exception) -> None:
        from nexus.ledger import LedgerBusyError, LedgerFullError, TurnNotSavedError

        if not isinstance(exc, LedgerFullError | LedgerBusyError | TurnNotSavedError):
            log.exception("the batch of %s (session %s) failed; it is tried again in %g s", agent_id, label,
                          RETRY_AFTER_S)  # fmt: skip
            return
        kind = type(exc).__name__
        said, since = self.lasting.get(kind, (-REPEAT_NOTICE_S, 0))
        now = time.monotonic()
        if now - said < REPEAT_NOTICE_S:
            self.lasting[kind] = (said, since + 1)
            return
        more = f" ({since} more failed batches since the last notice)" if since else ""
        log.warning("the batch of %s (session %s) could not be written: %s; batches wait in the ledger and are "
                    "tried again every %g s, said again in %g s while it lasts%s", agent_id, label, exc,
                    RETRY_AFTER_S, REPEAT_NOTICE_S, more)  # fmt: skip
        self.lasting[kind] = (now, 0)


class SessionHeldElsewhere(Exception):
    """A step found its session run by another broker (its lease): look at it again after ``retry_after_s``."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"the session is run by another broker; looked at again in {retry_after_s:.2f} s")
        self.retry_after_s = retry_after_s


class DrainScheduler:
    """Runs ready sessions' batches on up to ``limit`` worker tasks, first come first served."""

    def __init__(
        self,
        limit: int,
        step: Step,
        now_ms: Callable[[], int],
        on_idle: Callable[[AgentSlot, SessionSlot], None],
    ) -> None:
        """``on_idle`` is told when a session has no run and nothing queued (its ``idle`` event is set)."""
        self._limit = max(1, limit)
        self._step = step
        self._now_ms = now_ms
        self._on_idle = on_idle
        self._line: deque[tuple[AgentSlot, SessionSlot]] = deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._timed: dict[int, SessionSlot] = {}
        """Sessions with a timer armed, by ``id`` (a slot is not hashable): cancelled on close."""
        self._closed = False
        self._notices = FailureNotices()
        self._beside = 0
        """Seats held by runs started beside the queues (:mod:`._beside`): they count against ``limit`` too."""
        self._seat_waiters: deque[asyncio.Future[None]] = deque()
        self._lent = 0
        """Seats counted in ``_workers`` or ``_beside`` whose runs wait on another agent (not doing work)."""
        self._returning: deque[Seat] = deque()
        """Lent seats whose waits are over, in line for a seat again (served before the runs and batches)."""

    def _free(self) -> bool:
        """A seat is free: fewer runs doing work than ``limit``."""
        return len(self._workers) + self._beside - self._lent < self._limit

    def schedule(self, slot: AgentSlot, session: SessionSlot) -> None:
        """Look at the session again: in line if a batch is ready, a timer if one will be, else idle.

        Harmless to call any number of times: a session already in line or running is left
        alone (its worker looks again after the batch).
        """
        if self._closed or session.scheduled or session.active:
            return
        if session.timer is not None and session.parked_until > time.monotonic():
            return  # another broker runs it: its timer (or a wake-up) looks again, not every message sent
        if session.timer is not None:  # whatever it waited for, this look decides again
            self._cancel_timer(session)
        ready_at = session.queue.ready_at()
        if ready_at is None:
            session.idle.set()
            self._on_idle(slot, session)
            return
        if ready_at and ready_at > (now := self._now_ms()):  # a collect batch inside its quiet window: look again
            self._arm_timer(slot, session, (ready_at - now) / 1000)  # when it ends (0: ready now, no clock read)
            return
        session.scheduled = True
        self._line.append((slot, session))
        if self._free():
            self._add_worker()

    def _add_worker(self) -> None:
        worker = asyncio.get_running_loop().create_task(self._work(), name="broker:worker")
        self._workers.add(worker)  # removed by the worker itself as it ends, not by a done callback:
        # that would run an iteration later, and a session put in line meanwhile would find every
        # worker slot taken by workers that have already stopped looking at the line

    async def seat(self) -> None:
        """Take one of the ``limit`` seats for a run beside the queues, waiting in line while all are taken.

        Raises ``CancelledError`` when the scheduler closes first. A worker gives its seat up after its
        batch when a run waits for one, so such runs and the sessions' batches take turns.
        """
        if self._closed:
            raise asyncio.CancelledError
        if not self._seat_waiters and not self._returning and self._free():
            self._beside += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._seat_waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a seat as the wait was cancelled: give it on
                self.free_seat()
            elif waiter in self._seat_waiters:
                self._seat_waiters.remove(waiter)
            raise

    def free_seat(self, seat: Seat | None = None) -> None:
        """A run beside the queues ended: its seat goes to the next run waiting, else to the line (``seat``: as
        its run held it, still lent if a wait outlived the run)."""
        if seat is not None and seat.lent:
            self._retired(seat)
        self._beside -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        """Seats are free: a lent seat wanted back takes one first, then a run waiting for one, then a
        worker serves the line."""
        while self._free():
            if self._returning:
                self._give_back(self._returning.popleft())
                continue
            waiter = self._seat_waiters.popleft() if self._seat_waiters else None
            if waiter is not None:
                if not waiter.done():
                    self._beside += 1
                    waiter.set_result(None)
                continue
            if self._line and not self._closed:
                self._add_worker()
            return

    # ------------------------------------------------------------------ lent seats (see nexus.broker._lending)

    def lend(self) -> Lending | None:
        """The calling run waits on another agent: its seat is lent until :meth:`take_back` (or the reply's
        :meth:`want_back`). ``None``: the caller holds no seat of this scheduler (nothing is lent)."""
        seat = HELD_SEAT.get()
        if seat is None or seat.owner is not self or self._closed:
            return None
        seat.waits += 1
        if seat.waits == 1:
            if seat.returning:  # wanted back, not given yet: lent again as it is
                seat.returning = False
                self._returning.remove(seat)
            elif not seat.lent:
                seat.lent = True
                self._lent += 1
                self._hand_over()
        return Lending(seat)

    def want_back(self, lending: Lending) -> None:
        """The wait is over (called as the reply is settled, before the waiting task resumes, so no batch
        finishing meanwhile takes the seat first): the seat comes back now if one is free, else first in line."""
        seat = lending.seat
        if lending.over or seat.owner is not self:  # ended already, or its seat retired (its holder has it)
            return
        lending.over = True
        seat.waits -= 1
        if seat.waits or not seat.lent or seat.returning:
            return
        if self._closed or (not self._returning and self._free()):
            self._give_back(seat)
        else:
            seat.returning = True
            self._returning.append(seat)

    async def take_back(self, lending: Lending) -> None:
        """Before the waiting run goes on: its seat again (waits while every seat does work). Cancelled, it
        takes the seat at once: the run is being stopped and must write its turn (one run over the cap)."""
        self.want_back(lending)
        seat = lending.seat
        if not seat.lent:
            return
        if seat.back is None:
            seat.back = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait((seat.back,))  # not cancelling the future: a parallel wait may await it too
        finally:
            if seat.lent and not seat.waits:
                self._reclaim(seat)

    def take_back_now(self, lending: Lending) -> None:
        """The wait was cancelled (the run is being stopped): the seat comes back at once (see :meth:`take_back`)."""
        self.want_back(lending)
        seat = lending.seat
        if seat.lent and not seat.waits:
            self._reclaim(seat)

    def _retired(self, seat: Seat) -> Seat:
        """Its holder has the seat again whatever its waits do (they find it retired); a new one for its next runs."""
        self._reclaim(seat)
        seat.owner = None
        return Seat(self)

    def _reclaim(self, seat: Seat) -> None:
        """A lent seat is its holder's again now, out of the line of seats wanted back if it was there."""
        if seat.returning:
            self._returning.remove(seat)
        self._give_back(seat)

    def _give_back(self, seat: Seat) -> None:
        seat.lent = seat.returning = False
        self._lent -= 1
        back, seat.back = seat.back, None
        if back is not None and not back.done():
            back.set_result(None)

    async def close(self) -> None:
        """Take no more batches; wait for the workers' current ones to end (the caller aborts the runs)."""
        self._closed = True
        for waiter in self._seat_waiters:
            waiter.cancel()
        self._seat_waiters.clear()
        while self._returning:  # their runs are being aborted: they go on to write their turns
            self._give_back(self._returning.popleft())
        for session in list(self._timed.values()):
            self._cancel_timer(session)
        for _, session in self._line:
            session.scheduled = False
        self._line.clear()
        if self._workers:
            await asyncio.gather(*list(self._workers), return_exceptions=True)

    def _arm_timer(self, slot: AgentSlot, session: SessionSlot, delay_s: float) -> None:
        session.timer = asyncio.get_running_loop().call_later(delay_s, self._timer_fired, slot, session)
        self._timed[id(session)] = session

    def _timer_fired(self, slot: AgentSlot, session: SessionSlot) -> None:
        session.timer = None
        session.parked_until = 0.0
        self._timed.pop(id(session), None)
        self.schedule(slot, session)

    def wake(self, slot: AgentSlot, session: SessionSlot) -> None:
        """Look at a session now, even one parked because another broker ran it (a wake-up said it may be free)."""
        session.parked_until = 0.0
        self.schedule(slot, session)

    def _cancel_timer(self, session: SessionSlot) -> None:
        if session.timer is not None:
            session.timer.cancel()
            session.timer = None
            self._timed.pop(id(session), None)

    async def _work(self) -> None:
        """Serve the line until it is empty; each session's batch, then the session looked at again."""
        HELD_SEAT.set(seat := Seat(self))  # the runs of this worker's batches lend it while they wait on another agent
        try:
            while self._line and not self._closed and not self._seat_waiters and not self._returning:
                if seat.lent:  # a wait outlived its run (left, not cancelled): the seat is this worker's again
                    HELD_SEAT.set(seat := self._retired(seat))
                slot, session = self._line.popleft()
                session.scheduled = False
                session.active = True
                try:
                    await self._step(slot, session)
                except SessionHeldElsewhere as held:  # parked until its timer (or a wake-up)
                    session.active = False
                    if not self._closed:
                        session.parked_until = time.monotonic() + held.retry_after_s
                        self._arm_timer(slot, session, held.retry_after_s)
                    continue
                except Exception as exc:  # a bug in one batch must not stop the other sessions, nor spin on this one
                    if self._closed:  # e.g. its items could not be handed back with the database away: they wait
                        log.warning("the batch of %s (session %s) ended with the broker's stop (%s); its "
                                    "messages wait in the ledger for the next start", slot.agent_id, session.label,
                                    exc)  # fmt: skip
                    else:
                        self._notices.failed(slot.agent_id, session.label, exc)
                    session.active = False
                    self._retry_later(slot, session)
                    continue
                session.active = False
                self.schedule(slot, session)
        finally:
            if seat.lent:
                self._retired(seat)
            worker = asyncio.current_task()
            if worker is not None:
                self._workers.discard(worker)
            if self._seat_waiters or self._returning:  # a run waits for a seat, or a lent one is wanted back
                self._hand_over()

    def _retry_later(self, slot: AgentSlot, session: SessionSlot) -> None:
        """After a failed batch: its items wait again, and the session is looked at after a pause.

        The batch's items were marked in flight when it was taken; left so, they stayed in memory
        unrun (a claim refused by a database another process held a moment too long stranded the
        message until the session's next one) and the session never counted as idle again.
        """
        if session.run is None:
            session.queue.release([item.item_id for item in session.queue.items if item.in_flight])
            session.steers.clear()
        if not self._closed:
            self._arm_timer(slot, session, RETRY_AFTER_S)
