"""What the event loop's long iterations are made of (``bench_engine_concurrent.py --slow-iterations MS``).

The lag p99 of a ticker is set by the few loop iterations that run long: one iteration runs every
callback that was ready when it began, so a tick waits for all of them. This times each iteration
(CPU time of the loop thread) and, for those over the threshold, adds up which callbacks ran in them
(a task's steps under its coroutine's name) and how much of them was a garbage collection. It
wraps ``asyncio.events.Handle._run`` for every callback while it is on, which costs the loop a
little: the lags of a run with it are not comparable with one without.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from asyncio import events
from collections import Counter
from typing import Any


def _name(callback: Any) -> str:
    """A callback's name; a task's step or wake-up under its coroutine's."""
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        return "task " + getattr(owner.get_coro(), "__qualname__", "?")
    name = getattr(callback, "__qualname__", None) or type(callback).__name__
    return name if owner is None or "." in name else f"{type(owner).__name__}.{name}"


class SlowIterations:
    """Counts the loop's iterations over ``threshold_s`` of loop CPU and what ran in them (module docstring)."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.iterations = self.slow = self.with_gc = 0
        self.slow_cpu = self.slow_gc = 0.0
        self.cpu: dict[str, float] = {}
        self.calls: Counter[str] = Counter()
        self._ran: list[tuple[float, Any]] = []
        self._gc = 0.0
        self._gc_began = 0.0
        self._thread = threading.get_ident()
        self._on = False
        self._saved: Any = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Time the iterations of ``loop`` (this thread's) from now on."""
        run_once = loop._run_once  # type: ignore[attr-defined]
        handle_run = events.Handle._run
        ran = self._ran

        def timed_run(handle: events.Handle) -> None:
            began = time.thread_time()
            handle_run(handle)
            ran.append((time.thread_time() - began, handle._callback))  # type: ignore[attr-defined]

        def timed_once() -> None:
            ran.clear()
            self._gc = 0.0
            began = time.thread_time()
            run_once()
            self._iteration(time.thread_time() - began)

        self._saved = (loop, handle_run)
        events.Handle._run = timed_run  # type: ignore[method-assign,assignment]
        loop._run_once = timed_once  # type: ignore[attr-defined]
        gc.callbacks.append(self._collection)

    def stop(self) -> None:
        """Stop timing (the loop and ``Handle`` as they were)."""
        loop, handle_run = self._saved
        events.Handle._run = handle_run  # type: ignore[method-assign]
        del loop._run_once
        gc.callbacks.remove(self._collection)

    def _collection(self, phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != self._thread:
            return  # a collection on the writer thread does not stop the loop's own work
        if phase == "start":
            self._gc_began = time.thread_time()
        else:
            self._gc += time.thread_time() - self._gc_began

    def _iteration(self, cpu: float) -> None:
        self.iterations += 1
        if cpu <= self.threshold_s:
            return
        self.slow += 1
        self.slow_cpu += cpu
        if self._gc:
            self.with_gc += 1
            self.slow_gc += self._gc
        for spent, callback in self._ran:
            name = _name(callback)
            self.cpu[name] = self.cpu.get(name, 0.0) + spent
            self.calls[name] += 1

    def summary(self) -> str:
        """One line: how many iterations ran long, their CPU, the collections in them, their top callbacks."""
        ranked = sorted(self.cpu.items(), key=lambda item: -item[1])[:6]
        top = ", ".join(f"{name} {self.calls[name]}x {spent * 1000:.0f} ms" for name, spent in ranked)
        return (
            f"loop iterations over {self.threshold_s * 1000:g} ms of loop CPU while streaming: {self.slow} of "
            f"{self.iterations}, {self.slow_cpu * 1000:.0f} ms in them; {self.with_gc} held a garbage collection "
            f"({self.slow_gc * 1000:.0f} ms of it); their callbacks by CPU: {top or 'none'}"
        )
