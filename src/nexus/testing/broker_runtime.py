"""A scripted stand-in for the engine's ``Runtime`` under a broker: each run waits, then writes its turn.

For tests and benchmarks of the broker across processes (leases, wake-ups, crashes) where the model is
beside the point: :meth:`ScriptedRuntime.start` returns a run that takes ``run_s`` seconds (the model
call), then writes its turn through the ledger's async store (``ledger.turns.write``), consuming its
queue items in that transaction as the engine does; aborted, it writes an ``aborted`` turn, as the engine
does. It works on any backend (the engine's runs need the synchronous ledger, SQLite only, for now).
``on_run(event, fields)`` hears each run's ``start`` and ``end`` (with its outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from nexus.ledger import TurnWrite, new_ulid
from nexus.llm import AssistantMessage, TextContent, Usage, UserMessage

if TYPE_CHECKING:
    from nexus.broker import BrokerSettings
    from nexus.engine import AgentResult
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
        write = TurnWrite(
            self.session_label, query_messages=[UserMessage(self._prompt)], response_messages=[reply],
            status=status, consumed_queue_items=self._consumes,
        )  # fmt: skip
        try:
            turn = await self._runtime.ledger.turns.write(write)
        except Exception as exc:
            self._tell("end", outcome=type(exc).__name__)
            raise
        finally:
            self.state = "done"
        self._tell("end", outcome=status, turn=turn)
        if status == "completed":
            return AgentResult(stop_reason="end_turn", turn_id=turn)
        return AgentResult(stop_reason="aborted", turn_id=turn, error=AgentError("unknown", "aborted"))

    def abort(self, reason: str = "aborted") -> None:
        """End the run now: it writes an ``aborted`` turn."""
        self._aborted.set()

    def steer(self, message: Any, **kwargs: Any) -> Any:
        """Not scripted: send ``followup`` messages to a broker on this runtime."""
        raise NotImplementedError("the scripted runtime takes no steers; use followup mode")

    def on_event(self, listener: Any) -> Callable[[], None]:
        """No events: the run has none to publish."""
        return lambda: None


class ScriptedRuntime:
    """What :class:`~nexus.broker.AgentBroker` needs of a ``Runtime``: ``start`` returning a :class:`ScriptedRun`."""

    def __init__(self, ledger: Ledger, run_s: float, on_run: OnRun | None = None) -> None:
        self.ledger, self.run_s, self.on_run = ledger, run_s, on_run

    def model_problem(self, ref: str) -> str | None:
        """Every model is fine: no model is called."""
        return None

    def start(self, spec: Any, session: str, message: Any, *, consumes: Sequence[str] = (), **_: Any) -> ScriptedRun:
        """Start a run of ``message`` in ``session`` consuming ``consumes``."""
        return ScriptedRun(self, session, str(message), consumes)


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
    await broker.close()
    await ledger.aclose()
