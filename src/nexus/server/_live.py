"""Every run of ``nexus serve``, live on its session's event stream (``/v1/sessions/{label}/events``).

The runtime tells :class:`LiveRuns` of each run it starts, before it runs (``Runtime.on_start``): its
``StreamEvent``\\ s (:func:`~nexus.streaming.stream_events`, the streaming bridge's one mapping) are
published into the :class:`EventHub` under the session's own label, where the web UI and any SSE client
read them. Publishing never waits for a reader (the hub keeps a bounded log per session).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from nexus.adapters import DeliveryTarget
from nexus.streaming import is_terminal, stream_events

if TYPE_CHECKING:
    from nexus.engine import Execution
    from nexus.streaming import StreamEvent

log = logging.getLogger("nexus.server")

WEB_CHANNEL = "web"
"""The ``target.channel`` of a run watched over the server's event stream."""


class Publisher(Protocol):
    """Where events go: the :class:`EventHub` itself, or (PostgreSQL) the :class:`EventRelay` in front of it."""

    def publish(self, session_label: str, event_type: str, data: dict[str, Any], /) -> object:
        """Take one event; never waits."""
        ...


class LiveRuns:
    """Publishes the StreamEvents of every run into the hub (one small task per run)."""

    def __init__(self, hub: Publisher) -> None:
        self.hub = hub
        self._tasks: set[asyncio.Task[None]] = set()

    def follow(self, execution: Execution) -> None:
        """``Runtime.on_start``: publish ``execution``'s events from its start."""
        label = execution.session_label
        events = stream_events(execution, DeliveryTarget(WEB_CHANNEL, "server", label))
        task = asyncio.get_running_loop().create_task(self._publish(label, events, execution), name=f"live:{label}")
        self._tasks.add(task)

    def taken_over(self, label: str, prior_holder: str) -> None:
        """A run of ``label`` died with its process (its lease expired): its streams end with a ``stream_error``
        saying so (else a reader would wait for a ``stream_end`` that never comes); the run starts again here."""
        error = (f"the process running this session stopped mid-run ({prior_holder}); its reply so far stays in the "
                 "history as an aborted turn, and the message runs again on another process")  # fmt: skip
        self.hub.publish(label, "stream_error", {"error": error, "partial": True})

    async def _publish(self, label: str, events: AsyncIterator[StreamEvent], execution: Execution) -> None:
        publish = self.hub.publish
        try:
            async for event in events:
                if is_terminal(event) and await _fenced(execution):
                    log.info("run %s lost its session's lease: its end is not published", execution.run_id)
                    continue
                publish(label, event.type, event.to_json())
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)


async def _fenced(execution: Execution) -> bool:
    """True when the run's final write was refused because its lease was lost (another process took the session
    over, paused or cut off as this one was). Its end is then not published: the new holder's ``stream_error``
    already ended this run for every reader, and a ``stream_end{final:true}`` arriving later, in the middle of
    the new run's stream, would end that live reply early for a reader that does not check ``runId``."""
    from nexus.ledger import LeaseLostError

    outcome = execution.result
    await asyncio.wait({outcome})  # it ends right after the event that ended the run
    return not outcome.cancelled() and isinstance(outcome.exception(), LeaseLostError)
