"""The broker's :class:`~nexus.engine.wiring.runtime.Spawner`: a ``spawn_agent`` worker is a broker agent.

The engine's own spawner runs a worker session inline; under the broker the worker is a
registered agent of its own (role ``worker``, its own durable queue and session), and the task
is a durable message to it, so the worker shows up in ``nexus agents list``, its run in
``nexus queue list``, and the task survives a crash like any message. The session keeps the
engine's sub-agent links (parent session, turn, spawning tool call, task and its status).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from nexus.agent import AgentToolResult, ToolUpdateFn
from nexus.broker.types import AgentIdentity, AgentMessage, BrokerError
from nexus.llm import AbortSignal

if TYPE_CHECKING:
    from nexus.broker.broker import AgentBroker
    from nexus.engine import RunScope


@dataclass(slots=True)
class BrokerSpawner:
    """Spawns each worker as a broker agent and waits for its reply (the tool's result)."""

    broker: AgentBroker
    reply_timeout_ms: int = 600_000

    async def spawn(
        self,
        scope: RunScope,
        call_id: str,
        task: str,
        label: str | None,
        signal: AbortSignal,
        on_update: ToolUpdateFn | None,
    ) -> AgentToolResult:
        """Register the worker (session linked to the spawning run), send it ``task``, return its reply."""
        from nexus.engine import AgentSpec, create_worker_session
        from nexus.ledger import new_ulid

        if scope.runtime is None:
            return AgentToolResult.text("spawn_agent needs an engine runtime", is_error=True)
        ledger = scope.runtime.ledger
        session = await create_worker_session(ledger, scope, call_id, task, label)
        worker_id = f"worker-{new_ulid().lower()}"
        parent = self._agent_of(scope.session_label)
        self.broker.register_agent(
            AgentIdentity(worker_id, session, "worker"),
            spec=AgentSpec(role="worker", model=scope.model.ref, limits=scope.limits, depth=scope.depth + 1),
        )
        details: dict[str, object] = {"spawned_session_label": session, "agent_id": worker_id, "depth": scope.depth + 1}
        message = AgentMessage(f"spawn:{call_id}:{worker_id}", parent or "system", worker_id, task)

        def stop_worker() -> None:  # the spawning run was aborted: so is its worker's turn
            self.broker.abort(worker_id)

        remove = signal.add_listener(stop_worker)
        try:
            result = await self.broker.send_and_wait(message, timeout_ms=self.reply_timeout_ms)
        except BrokerError as exc:
            await ledger.sessions.update(session, task_status="failed")
            return AgentToolResult.text(f"The sub-agent could not run: {exc}", details=details, is_error=True)
        finally:
            remove()
        await ledger.sessions.update(session, task_status="completed" if result.success else "failed")
        details["turn_id"] = result.turn_id
        if result.success:
            return AgentToolResult.text(
                result.reply or "(the sub-agent finished without a text answer)", details=details
            )
        partial = f"\nPartial answer:\n{result.reply}" if result.reply else ""
        return AgentToolResult.text(f"The sub-agent did not finish: {result.error}{partial}", details=details,
                                    is_error=True)  # fmt: skip

    def _agent_of(self, session_label: str) -> str | None:
        """The broker agent that talks in ``session_label`` (the spawning agent), if any."""
        for agent in self.broker.list_agents():
            if agent.identity.session_label == session_label:
                return agent.identity.agent_id
        return None
