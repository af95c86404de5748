"""The broker's runner on the engine: each batch becomes a real turn of the agent's session.

A run takes the session's cross-process lock (one run per session, also across processes),
assembles the context from the ledger with the agent's spec (model, tools, system prompt),
adds the agent-to-agent tools, and runs it with the engine's failover, compaction and crash
journal. The queue items the turn consumes travel in ``AssembledContext.queue_item_ids``, so
the ledger marks them delivered in the same transaction that writes the turn.

Steering goes through the engine's receipts: a steer offered while the turn runs is injected
at its next safe point (``delivered``, and its queue item is marked with the turn in the turn's
own transaction) or handed back (``returned``: the run ended, failed, was aborted or is
compacting) and the broker puts it back in its place. A steer that arrives before the turn has
started is handed back at once and runs as the next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nexus.broker._items import positive_int
from nexus.broker.agent_tools import CallerContext, agent_tools
from nexus.broker.runner import RunOutcome, RunPhase, RunRequest, SteerReceipt, SteerStatus
from nexus.errors import NexusError
from nexus.llm.abort import AbortSignal

if TYPE_CHECKING:
    from nexus.agent.tool_types import AgentTool
    from nexus.broker.broker import AgentBroker
    from nexus.engine.execution.events import ExecutionEvent
    from nexus.engine.execution.execute import EngineExecution
    from nexus.engine.types import AgentResult, AgentRole
    from nexus.engine.wiring.runner import EngineEnv


@dataclass(slots=True)
class _Returned:
    """A receipt that is final at once: the run hands the steer back to the broker."""

    status: SteerStatus = "returned"


class EngineRunHandle:
    """One agent turn on the engine (see :class:`~nexus.broker.runner.RunHandle`)."""

    def __init__(self, runner: EngineRunner, request: RunRequest) -> None:
        self._runner = runner
        self._request = request
        self._signal = AbortSignal()
        self._execution: EngineExecution | None = None
        self._listeners: list[Callable[[ExecutionEvent], object]] = []
        self._task = asyncio.get_running_loop().create_task(self._main(), name=f"agent-run:{request.agent_id}")

    @property
    def phase(self) -> RunPhase:
        """``starting`` until the turn runs, then ``streaming``/``compacting``, ``done`` at the end."""
        if self._task.done():
            return "done"
        execution = self._execution
        if execution is None:
            return "starting"
        if execution.is_compacting:
            return "compacting"
        return "streaming" if execution.is_streaming else "finishing"

    @property
    def request(self) -> RunRequest:
        """What this run was started with (its agent, session and the queue items it consumes)."""
        return self._request

    def on_event(self, listener: Callable[[ExecutionEvent], object]) -> None:
        """Call ``listener`` with every event of this run's channel (enveloped; from its start if subscribed early).

        For watchers such as the server's streaming endpoints: subscribe right after the run is
        announced by :meth:`EngineRunner.on_run`; events before the turn starts do not exist.
        """
        self._listeners.append(listener)
        if self._execution is not None:
            self._execution.on_event(listener)

    def steer(self, text: str, *, item_id: str | None, one_at_a_time: bool, source: str = "steer") -> SteerReceipt:
        """Offer ``text`` to the running turn (see the module docstring)."""
        execution = self._execution
        if execution is None or self._task.done():
            return _Returned()
        from nexus.llm.types import UserMessage

        return execution.steer(UserMessage(text), id=item_id, mode="one" if one_at_a_time else "all", source=source)

    def abort(self, reason: str) -> None:
        """Stop the turn (before it starts, or while it runs: it is written ``aborted``)."""
        self._signal.abort(reason)
        if self._execution is not None:
            self._execution.abort(reason)

    async def result(self) -> RunOutcome:
        """How the turn ended."""
        return await asyncio.shield(self._task)

    async def _main(self) -> RunOutcome:
        from nexus.engine.execution.session_lock import run_lock

        request, env = self._request, self._runner.env
        try:
            role: AgentRole = "manager" if request.role == "manager" else "worker"
            model = env.model(_text(request.spec.get("model")) or None)
            env.preflight(model)
            async with run_lock(env.ledger, request.session_label, signal=self._signal) as held:
                if not held:
                    return RunOutcome(status="aborted", error="aborted before the turn started")
                depth = _depth(request.spec.get("depth"))  # > 0 for a worker spawned by spawn_agent
                wanted = request.spec.get("tools")
                await env.prepare_tools(request.session_label, role, wanted if isinstance(wanted, list) else None,
                                        self._signal)  # fmt: skip
                ctx = env.assemble(request.prompt, session=request.session_label, model=model, role=role,
                                   signal=self._signal, depth=depth)  # fmt: skip
                # a chat-only model (the bundled SmolLM2) loops on tools: it gets none, agent tools included
                ctx.tools = [] if env.chat_only(model) else self._runner.tools_for(request, ctx.tools, role)
                limit = positive_int(request.spec.get("max_tokens"))  # a chat completion's max_tokens
                if limit is not None:
                    ctx.max_response_tokens = min(limit, model.max_tokens)
                extra = _text(request.spec.get("system_prompt"))
                if extra:
                    ctx.system_prompt = f"{ctx.system_prompt}\n\n## Agent instructions\n\n{extra}"
                ctx.queue_item_ids = request.item_ids
                if request.source is not None:
                    ctx.source = request.source
                self._execution = env.start(ctx, model=model, depth=depth, agent_id=request.agent_id)
                for listener in self._listeners:
                    self._execution.on_event(listener)
                result = await self._execution.result
                return _outcome(result, self._execution.turn_id)
        except NexusError as exc:  # a run that cannot start (no key, bad model): the items fail with the reason
            return RunOutcome(status="failed", error=str(exc))


class EngineRunner:
    """Starts broker turns on an :class:`~nexus.engine.EngineEnv` (see :mod:`nexus.broker.runner`)."""

    def __init__(self, env: EngineEnv, *, max_hops: int = 8, reply_timeout_ms: int = 600_000) -> None:
        self.env = env
        self.max_hops = max_hops
        self.reply_timeout_ms = reply_timeout_ms
        self._broker: Callable[[], AgentBroker | None] = lambda: None
        self._run_listeners: list[Callable[[EngineRunHandle], object]] = []

    def attach(self, broker: AgentBroker) -> None:
        """The broker whose agents this runner's turns may message (their agent tools).

        It also becomes the engine's spawner: a ``spawn_agent`` worker is a broker agent.
        """
        from nexus.broker.spawner import BrokerSpawner

        self._broker = lambda: broker
        self.env.spawner = BrokerSpawner(broker, reply_timeout_ms=self.reply_timeout_ms)

    async def close(self) -> None:
        """Stop what the runs shared and the broker outlives: the MCP servers started for them."""
        if self.env.mcp is not None:
            await self.env.mcp.close()

    def model_problem(self, ref: str) -> str | None:
        """Why no run could reach model ``ref`` (the check of ``nexus agents add --model``), or ``None``.

        An env with its own ``stream_fn`` (tests, embedding) takes any model, as the engine's pre-flight does.
        """
        if self.env.stream_fn is not None:
            return None
        from nexus.engine.wiring.runner import unreachable_model_problem

        return unreachable_model_problem(self.env.config, ref)

    def start(self, request: RunRequest) -> EngineRunHandle:
        """Begin one turn in the background (announced to :meth:`on_run` listeners before it runs)."""
        handle = EngineRunHandle(self, request)
        for listener in list(self._run_listeners):
            listener(handle)
        return handle

    def on_run(self, listener: Callable[[EngineRunHandle], object]) -> Callable[[], None]:
        """Call ``listener`` with every run as it starts; returns a function that unsubscribes it.

        The server uses it to find the run that consumes a queue item (``handle.request.item_ids``)
        and stream that run's tokens with :meth:`EngineRunHandle.on_event`.
        """
        self._run_listeners.append(listener)

        def remove() -> None:
            if listener in self._run_listeners:
                self._run_listeners.remove(listener)

        return remove

    def tools_for(self, request: RunRequest, base: list[AgentTool], role: AgentRole) -> list[AgentTool]:
        """The turn's tools: the engine's by policy plus the agent tools, narrowed to the spec's list if any."""
        tools = list(base)
        broker = self._broker()
        if broker is not None:
            from nexus.ledger import new_ulid

            caller = CallerContext(
                request.agent_id,
                request.conversation_id or new_ulid(),
                hop=request.hop,
                max_hops=self.max_hops,
                reply_timeout_ms=self.reply_timeout_ms,
                session=request.session_key,
                deliver_to=request.deliver_to,
            )
            policy = self.env.config.tools
            tools += [t for t in agent_tools(broker, caller) if policy.is_allowed(t.name, request.session_label, role)]
        wanted = request.spec.get("tools")
        if isinstance(wanted, list):
            from nexus.config._tool_names import expand_tool_patterns, tool_matches

            expanded = expand_tool_patterns([str(name) for name in wanted])
            tools = [t for t in tools if tool_matches(t.name, expanded)]
        return tools


def _depth(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _outcome(result: AgentResult, turn_id: str | None) -> RunOutcome:
    from nexus.engine.execution.ledger_map import turn_status

    status = turn_status(result)
    error = result.error.message if result.error is not None else None
    return RunOutcome(status=status, turn_id=turn_id, reply=result.reply, error=error)  # type: ignore[arg-type]
