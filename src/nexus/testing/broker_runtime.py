"""A scripted stand-in for the engine's ``Runtime`` under a broker: each run waits, then writes its turn.

For tests and benchmarks of the broker across processes (leases, wake-ups, crashes) where the model is
beside the point: :meth:`ScriptedRuntime.start` returns a run that takes ``run_s`` seconds (the model
call), then writes its turn through the ledger's async store (``ledger.turns.write``), consuming its
queue items in that transaction as the engine does; aborted, it writes an ``aborted`` turn, as the engine
does. It works on any backend (the engine's runs need the synchronous ledger, SQLite only, for now).
A steer offered while the run waits is read by it (its id is consumed with the turn, as the engine's
delivered steers are); one offered later is handed back. ``on_run(event, fields)`` hears each run's
``start`` and ``end`` (with its outcome).

As a script, a broker process for the fault tests and bench (``nexus.testing.faults``)::

    python -m nexus.testing.broker_runtime TARGET TTL_MS RUN_S [POLL_MS [WAKEUPS]]

``TARGET`` is an SQLite file or a ``postgresql://`` URL whose agents are registered already. It prints
``ready`` once the broker has started, then one JSON line per run (``start``, ``end`` with the outcome) on
stdout; it runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from nexus.ledger import TurnWrite, new_ulid
from nexus.llm import AssistantMessage, TextContent, Usage, UserMessage

if TYPE_CHECKING:
    from nexus.broker import BrokerSettings
    from nexus.engine import AgentResult, SteerReceipt
    from nexus.ledger import Ledger

OnRun = Callable[[str, dict[str, object]], None]


class ScriptedRun:
    """One run of :class:`ScriptedRuntime` (what the broker uses of an ``Execution``)."""

    def __init__(self, runtime: ScriptedRuntime, session: str, prompt: str, consumes: Sequence[str]) -> None:
        self.run_id = new_ulid()
        self.session_label = session
        self.state = "streaming"
        self._runtime, self._prompt, self._consumes = runtime, prompt, tuple(consumes)
        self._aborted = asyncio.Event()
        from nexus.agent import SteeringQueue

        self._steering = SteeringQueue()
        self.result: asyncio.Task[AgentResult] = asyncio.get_running_loop().create_task(self._go())

    def _tell(self, event: str, **fields: object) -> None:
        if self._runtime.on_run is not None:
            self._runtime.on_run(event, {"session": self.session_label, "items": list(self._consumes), **fields})

    async def _go(self) -> AgentResult:
        from nexus.engine import AgentError, AgentResult

        self._tell("start")
        try:
            await asyncio.wait_for(self._aborted.wait(), self._runtime.run_s)
            status = "aborted"
        except TimeoutError:
            status = "completed"
        reply = AssistantMessage([TextContent(f"done: {self._prompt}")], provider="p", model="m", usage=Usage(1, 1))
        steered = self._read_steers(status == "completed")
        self.state = "finishing"
        write = TurnWrite(
            self.session_label, query_messages=[UserMessage(self._prompt)], response_messages=[reply],
            status=status, consumed_queue_items=(*self._consumes, *steered),
        )  # fmt: skip
        try:
            turn = await self._runtime.ledger.turns.write(write)
        except Exception as exc:
            self._tell("end", outcome=type(exc).__name__)
            raise
        finally:
            self.state = "done"
        self._tell("end", outcome=status, turn=turn, steers=steered)
        if status == "completed":
            return AgentResult(stop_reason="end_turn", turn_id=turn)
        return AgentResult(stop_reason="aborted", turn_id=turn, error=AgentError("unknown", "aborted"))

    def abort(self, reason: str = "aborted") -> None:
        """End the run now: it writes an ``aborted`` turn."""
        self._aborted.set()

    def steer(self, message: Any, *, id: str | None = None, mode: str = "all", source: str = "steer") -> SteerReceipt:
        """Offer ``message``: read with the turn if the run still waits (``delivered`` then), else ``returned``."""
        from nexus.engine import SteerReceipt

        receipt = SteerReceipt(id or new_ulid(), UserMessage(str(message)), cast(Any, mode), source=source)
        refuse = None if self.state == "streaming" else "the run has ended"
        return self._steering.offer(receipt, refuse=refuse)

    def _read_steers(self, read: bool) -> list[str]:
        """The ids of the steers the turn read (every one offered, as the engine's loop joins them at its
        safe points), or none: an aborted run hands them back."""
        delivered: list[str] = []
        if read:
            self._steering.on_settle(lambda receipt: delivered.append(receipt.id))
            while taken := self._steering.take():
                for message in taken:
                    self._steering.joined(message, 1 + len(delivered))
        self._steering.close("the run has ended" if read else "the run was aborted")
        return delivered

    def on_event(self, listener: Any) -> Callable[[], None]:
        """No events: the run has none to publish."""
        return lambda: None


class ScriptedRuntime:
    """What :class:`~nexus.broker.AgentBroker` needs of a ``Runtime``: ``begin`` returning a :class:`ScriptedRun`."""

    def __init__(self, ledger: Ledger, run_s: float, on_run: OnRun | None = None) -> None:
        self.ledger, self.run_s, self.on_run = ledger, run_s, on_run

    def model_problem(self, ref: str) -> str | None:
        """Every model is fine: no model is called."""
        return None

    def start(self, spec: Any, session: str, message: Any, *, consumes: Sequence[str] = (), **_: Any) -> ScriptedRun:
        """Start a run of ``message`` in ``session`` consuming ``consumes``."""
        return ScriptedRun(self, session, str(message), consumes)

    async def begin(self, spec: Any, session: str, message: Any, **options: Any) -> ScriptedRun:
        """:meth:`start` for a coroutine (the broker awaits the start of a batch's run)."""
        return self.start(spec, session, message, **options)


async def serve_broker(target: str, settings: BrokerSettings, run_s: float, on_run: OnRun) -> None:
    """A broker process's life: an :class:`~nexus.broker.AgentBroker` on a :class:`ScriptedRuntime` over the
    ledger at ``target`` (agents registered there already); prints ``ready`` once started, runs until SIGTERM."""
    import signal

    from nexus.broker import AgentBroker
    from nexus.ledger import Ledger

    ledger = await Ledger.connect(target)
    broker = AgentBroker(ledger, cast(Any, ScriptedRuntime(ledger, run_s, on_run)), settings)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await broker.start()
    print("ready", flush=True)
    await stop.wait()
    ledger.stopping()  # bounded, even with PostgreSQL away
    await broker.close()
    print("conflicts", getattr(ledger.database, "conflicts", 0), flush=True)  # refused writes run again (benches)
    await ledger.aclose()


def _say(event: str, fields: dict[str, object]) -> None:
    import json
    import os
    import time

    print(json.dumps({"pid": os.getpid(), "t": time.time(), "event": event, **fields}), flush=True)


def main(argv: Sequence[str]) -> None:
    """The script (see the module docstring): ``argv`` is ``TARGET TTL_MS RUN_S [POLL_MS [WAKEUPS]]``."""
    from nexus.broker import BrokerSettings, QueueSettings

    target, ttl_ms, run_s, *extra = argv
    settings = BrokerSettings(
        queue=QueueSettings(mode="followup"), leases=True, lease_ttl_ms=int(ttl_ms),
        poll_ms=int(extra[0]) if extra else 250, wakeups=cast(Any, extra[1] if len(extra) > 1 else "notify"),
    )  # fmt: skip
    asyncio.run(serve_broker(target, settings, float(run_s), _say))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
