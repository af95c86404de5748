"""A broker process for the lease tests: an ``AgentBroker`` under session leases on a shared ledger.

    python lease_worker.py TARGET TTL_MS RUN_S [POLL_MS [WAKEUPS]]

``TARGET`` is an SQLite file or a ``postgresql://`` URL whose agents are registered already. Runs are
scripted: each takes ``RUN_S`` seconds (the model call), then writes its turn through the ledger's async
store, consuming its queue items in that transaction as the engine does; aborted, it writes an
``aborted`` turn, as the engine does. It prints ``ready`` once the broker has started, then one JSON
line per run (``start``, ``end`` with the outcome) on stdout; it runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, cast

from nexus.broker import AgentBroker, BrokerSettings, QueueSettings
from nexus.engine import AgentError, AgentResult
from nexus.ledger import Ledger, TurnWrite, new_ulid
from nexus.llm.types import AssistantMessage, TextContent, Usage, UserMessage


def _say(**fields: object) -> None:
    print(json.dumps({"pid": os.getpid(), "t": time.time(), **fields}), flush=True)


class ScriptedRun:
    """A run of the scripted runtime: waits ``run_s`` (or an abort), then writes its turn."""

    def __init__(self, ledger: Ledger, session: str, prompt: str, consumes: Sequence[str], run_s: float) -> None:
        self.run_id = new_ulid()
        self.session_label = session
        self.state = "streaming"
        self._aborted = asyncio.Event()
        self._ledger, self._prompt, self._consumes, self._run_s = ledger, prompt, tuple(consumes), run_s
        self.result: asyncio.Task[AgentResult] = asyncio.get_running_loop().create_task(self._go())

    async def _go(self) -> AgentResult:
        _say(event="start", session=self.session_label, items=list(self._consumes))
        try:
            await asyncio.wait_for(self._aborted.wait(), self._run_s)
            status, stop = "aborted", "aborted"
        except TimeoutError:
            status, stop = "completed", "end_turn"
        reply = AssistantMessage([TextContent(f"done: {self._prompt}")], provider="p", model="m", usage=Usage(1, 1))
        write = TurnWrite(
            self.session_label, query_messages=[UserMessage(self._prompt)], response_messages=[reply],
            status=status, consumed_queue_items=self._consumes,
        )  # fmt: skip
        try:
            turn = await self._ledger.turns.write(write)
        except Exception as exc:
            _say(event="end", session=self.session_label, items=list(self._consumes), outcome=type(exc).__name__)
            raise
        finally:
            self.state = "done"
        _say(event="end", session=self.session_label, items=list(self._consumes), outcome=status, turn=turn)
        error = None if status == "completed" else AgentError("unknown", "aborted")
        return AgentResult(stop_reason=stop, turn_id=turn, error=error)  # type: ignore[arg-type]

    def abort(self, reason: str = "aborted") -> None:
        self._aborted.set()

    def steer(self, message: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the lease tests send followups only")

    def on_event(self, listener: Any) -> Any:
        return lambda: None


class ScriptedRuntime:
    """What the broker needs of ``Runtime``: ``start`` returning a run (see :class:`ScriptedRun`)."""

    def __init__(self, ledger: Ledger, run_s: float) -> None:
        self.ledger, self.run_s = ledger, run_s

    def model_problem(self, ref: str) -> str | None:
        return None

    def start(self, spec: Any, session: str, message: Any, *, consumes: Sequence[str] = (), **_: Any) -> ScriptedRun:
        return ScriptedRun(self.ledger, session, str(message), consumes, self.run_s)


async def main(target: str, ttl_ms: int, run_s: float, poll_ms: int, wakeups: str) -> None:
    ledger = await Ledger.connect(target)
    settings = BrokerSettings(
        queue=QueueSettings(mode="followup"), leases=True, lease_ttl_ms=ttl_ms, poll_ms=poll_ms,
        wakeups=cast(Any, wakeups),
    )  # fmt: skip
    broker = AgentBroker(ledger, cast(Any, ScriptedRuntime(ledger, run_s)), settings)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await broker.start()
    print("ready", flush=True)
    await stop.wait()
    await broker.close()
    await ledger.aclose()


if __name__ == "__main__":
    extra = sys.argv[4:]
    poll_ms = int(extra[0]) if extra else 250
    asyncio.run(
        main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), poll_ms, extra[1] if len(extra) > 1 else "notify")
    )
