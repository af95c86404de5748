"""Runs the broker starts beside its queues: a chat completion's turn in a session other than its agent's own.

The OpenAI facade runs a completion that names another session (``X-Nexus-Session``, ``user``) at
once with ``Runtime.begin``, not through a queue (docs/server.md, "How it runs"). Started beside the
broker, such a run was unknown to it: ``abort`` answered ``false`` and the run went on, the agent
read ``idle`` while it streamed, and any number ran at once whatever ``max_concurrent`` said. Here
each such run first takes a seat among the broker's ``max_concurrent`` (waiting in line with the
sessions' batches when all are taken), is listed with its agent while it runs (its state, its
abort), and the broker's close aborts it and waits until its turn is written. It gets the agent tools a
batch's run gets (``send_message_to_agent``...: without them it could not reach another agent), and lends
its seat while it waits on one like any run (:mod:`nexus.broker._lending`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

from nexus.broker._lending import HELD_SEAT, Seat
from nexus.broker.agent_tools import CallerContext

if TYPE_CHECKING:
    from typing import TypeAlias

    from nexus.agent import AgentTool
    from nexus.broker._scheduler import DrainScheduler
    from nexus.broker._slot import AgentSlot
    from nexus.engine import Execution

    BeginBeside: TypeAlias = Callable[[list[AgentTool]], Awaitable[Execution]]
    """What starts a run beside the queues, given the agent tools (``AgentBroker.run_beside``)."""


class BesideRuns:
    """The runs started beside the queues, each holding a seat of the scheduler until its turn ends."""

    def __init__(
        self, scheduler: DrainScheduler, tools: Callable[[CallerContext], list[AgentTool]], max_hops: int
    ) -> None:
        self._scheduler = scheduler
        self._tools = tools
        self._max_hops = max_hops
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: set[Execution] = set()
        self._closed: str | None = None
        """Why the broker closed (set as its close begins): a seat handed over after it starts nothing."""

    def start(self, slot: AgentSlot, begin: BeginBeside, label: str | None = None) -> asyncio.Future[Execution | None]:
        """Run ``begin(tools)`` once a seat is free; the future says the run it started, ``None`` if the broker
        closed first (nothing started), or ``begin``'s exception. Until then the agent is not idle (nor its
        session ``label``, a label or key, when the caller knows it: ``AgentSlot.beside_busy``).

        ``tools`` are the agent's tools to reach other agents. The run starts no conversation, and a reply it
        does not wait for goes to the agent's own session (the run's session is none of the broker's)."""
        started: asyncio.Future[Execution | None] = asyncio.get_running_loop().create_future()
        slot.beside_asked[started] = label
        tools = self._tools(CallerContext(slot.agent_id, None, max_hops=self._max_hops))
        run = self._run(slot, partial(begin, tools), started)
        task = asyncio.get_running_loop().create_task(run, name="broker:beside")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: slot.beside_asked.pop(started, None))  # even if it never got to run
        return started

    async def _run(
        self, slot: AgentSlot, begin: Callable[[], Awaitable[Execution]], started: asyncio.Future[Execution | None]
    ) -> None:
        try:
            await self._scheduler.seat()
        except asyncio.CancelledError:  # the broker closed before a seat was free
            started.set_result(None)
            return
        HELD_SEAT.set(seat := Seat(self._scheduler))  # the run's task inherits it: lent while it waits on an agent
        try:
            if self._closed is not None:  # a worker's seat handed over as the broker closed
                started.set_result(None)
                return
            try:
                execution = await begin()
            except Exception as exc:  # e.g. the session could not be made: the caller says why
                started.set_exception(exc)
                return
            if self._closed is not None:  # closed while it started: close() did not see it
                execution.abort(self._closed)
            slot.beside.add(execution)
            self._running.add(execution)
            started.set_result(execution)
            await asyncio.wait((execution.result,))  # its outcome is the caller's to read
            slot.beside.discard(execution)
            self._running.discard(execution)
        finally:
            self._scheduler.free_seat(seat)

    async def close(self, reason: str) -> None:
        """Abort every run beside the queues and wait until their turns are written (those still
        waiting for a seat end when the scheduler closes: nothing of theirs started)."""
        self._closed = reason
        for execution in list(self._running):
            execution.abort(reason)
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
