"""The engine's ledger writer thread: a run's ledger writes happen here, off the event loop, while runs share it.

One thread per process, shared by all runs (made on first use), so writes keep the order the
runs submitted them in (FIFO) and never contend for the ledger's connection lock with the
event loop: a loop that called ``write_turn`` itself would wait for a journal snapshot another
run's write was in the middle of, and with hundreds of runs the loop spent a third of its time
in SQLite (docs/benchmarks.md, "1,000 concurrent executions"). SQLite releases the GIL while it
works, so the loop keeps serving the other runs meanwhile.

While few runs are active (and nothing is queued) a run writes inline instead: the loop has
time to spare, and each hop adds a round of the loop to its turn (see :func:`inline_ok`). That is
for SQLite only: a write to a ledger reached over the network (PostgreSQL) always runs here, where
its wait for the server holds this thread and never the loop.

Not the loop's default executor: tools and the local llama.cpp provider run there, and a turn
write must not queue behind a long ``grep`` or a whole local generation.

:func:`settled` awaits a write through a cancellation of the awaiting task: a write already
handed to the thread still completes, and the run reports done only after it did (a turn
written is on disk before the execution's result is).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from nexus._per_loop import per_loop
from nexus._settled import Unstoppable, settled, unstoppable

T = TypeVar("T")

_WRITER: ThreadPoolExecutor | None = None
_WRITER_LOCK = threading.Lock()


def writer() -> ThreadPoolExecutor:
    """The process's ledger writer thread (see the module docstring)."""
    global _WRITER
    with _WRITER_LOCK:
        if _WRITER is None:
            _WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nexus-ledger-writer")
        return _WRITER


class _Load:
    """How many runs are active and how many writes are queued (process-wide, like the thread)."""

    __slots__ = ("lock", "queued", "runs")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queued = 0
        self.runs = 0


_LOAD = _Load()


def run_started() -> None:
    """A run became active (its writes may go inline while few are)."""
    with _LOAD.lock:
        _LOAD.runs += 1


def run_ended() -> None:
    """A run is no longer active."""
    with _LOAD.lock:
        _LOAD.runs -= 1


class _ActiveRun:
    """``with ACTIVE_RUN:`` counts a run as active for the block (:func:`run_started`, :func:`run_ended`).

    One shared object: a run that wrapped its body in a coroutine of its own for this kept one more
    frame alive for its whole life."""

    __slots__ = ()

    def __enter__(self) -> None:
        run_started()

    def __exit__(self, *exc: object) -> None:
        run_ended()


ACTIVE_RUN = _ActiveRun()


INLINE_MAX_RUNS = 16
"""Up to this many active runs, a write with nothing queued before it runs inline (see :func:`inline_ok`)."""


def inline_ok() -> bool:
    """A write may run on the caller's thread: few runs are active and nothing is queued.

    With few runs the loop has time to spare, and each hop to the thread and back costs the run a
    round of the loop per write: the broker, which runs 8 turns at a time by default, fell from
    530 to 380 turns/s when every write hopped (bench/bench_broker_e2e.py). With many runs the
    loop is what they share, and the thread keeps SQLite off it (bench_engine_concurrent.py).
    Nothing queued means the write still comes after every write submitted before it.
    """
    return _LOAD.runs <= INLINE_MAX_RUNS and _LOAD.queued == 0


RESUMES_PER_ROUND = 16
"""At most this many finished writes wake their runs per round of the event loop (see :class:`_Completions`)."""


class _Completions:
    """Writes the thread finished, handed to their loop at most :data:`RESUMES_PER_ROUND` per round.

    With hundreds of runs in step (started together, streaming at one pace), their writes are queued
    together and finish together; handed over one callback each, the loop woke every run whose write
    finished while it was busy in one round — 480 runs, ~48 ms of their work before any timer or
    socket came round (bench/bench_engine_concurrent.py). Handed over a batch per round, the runs
    resume in the same order, a round later at most per batch, and the loop serves the rest between
    batches; it also takes one callback per batch instead of two per write.
    """

    __slots__ = ("done", "lock", "loop", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # a strong one, as the value of its own weak key, would keep the loop forever
        self.lock = threading.Lock()
        self.done: deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = deque()
        self.scheduled = False

    def put(self, future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        """From the writer thread: a write finished; wake the loop unless a hand-over is already due."""
        with self.lock:
            self.done.append((future, result, error))
            if self.scheduled:
                return
            self.scheduled = True
        loop = self.loop()
        if loop is None:  # the loop is gone: nothing awaits these futures any more
            return
        try:
            loop.call_soon_threadsafe(self.hand_over)
        except RuntimeError:  # the loop is closed: likewise
            pass

    def hand_over(self) -> None:
        """On the loop: settle the next batch of futures (in the order the writes finished)."""
        for _ in range(RESUMES_PER_ROUND):
            with self.lock:
                if not self.done:
                    self.scheduled = False
                    return
                future, result, error = self.done.popleft()
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)
        asyncio.get_running_loop().call_soon(self.hand_over)


_completions = per_loop(_Completions)
"""The running loop's hand-over (made on first use; called on that loop's thread only)."""


def submit(fn: Callable[[], T]) -> Unstoppable[T]:
    """Queue ``fn`` on the writer thread; its result (or exception) arrives on the returned future, which cannot be
    cancelled (the write cannot be stopped either: see :func:`settled`)."""
    loop = asyncio.get_running_loop()
    future: Unstoppable[T] = unstoppable()
    completions = _completions(loop)
    with _LOAD.lock:
        _LOAD.queued += 1

    def job() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = fn()
        except StopIteration as exc:  # a future cannot carry it (as a coroutine's, it becomes a RuntimeError)
            error = RuntimeError(f"a ledger write raised StopIteration: {exc!r}")
        except BaseException as exc:  # delivered to the awaiter, as run_in_executor would
            error = exc
        finally:
            with _LOAD.lock:
                _LOAD.queued -= 1
        completions.put(future, result, error)

    writer().submit(job)
    return future


async def off_loop(fn: Callable[[], T], *, inline: bool = True) -> T:
    """Run ``fn`` on the writer thread (inline when :func:`inline_ok`) and return its result (see :func:`settled`).

    ``inline=False``: never on the caller's thread (``fn`` waits on a networked ledger, e.g. PostgreSQL).
    """
    if inline and inline_ok():
        return fn()
    return await settled(submit(fn))
