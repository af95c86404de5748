"""One OpenAI-style chat completion as a turn of an agent, with its text deltas as they stream.

Two ways in, chosen by the session the request names (see docs/server.md, "Which session"):

- the agent's own session: the prompt is sent through the broker like any message (mode
  ``followup``, so it is one turn of its own, queued behind whatever the agent is doing, durable
  and idempotent on the completion id); the run that consumes its queue item is found through
  :meth:`EngineRunner.on_run` and its engine events give the deltas;
- another session (``X-Nexus-Session`` or ``user``): the broker's runner runs the turn there at
  once, under that session's run lock, with the agent's spec (model, tools, instructions).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nexus.broker.runner import RunOutcome, RunRequest
from nexus.server._errors import ApiError

if TYPE_CHECKING:
    from nexus.broker.engine_runner import EngineRunHandle, EngineRunner
    from nexus.ledger.broker_store import AgentRow
    from nexus.server._state import ServerState

SETTLED_POLL_S = 0.5
"""How often a waiting completion re-reads its queue item (catches a drop or failure with no run)."""


@dataclass(slots=True)
class ChatTurn:
    """A started chat turn: ``deltas`` yields text pieces then ``None``; ``outcome`` resolves at the end."""

    session_label: str
    deltas: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    outcome: asyncio.Future[RunOutcome] | None = None

    def listen(self, event: object) -> None:
        """An event of the run's channel: a text delta of the streaming reply is passed on."""
        from nexus.engine.execution.events import ReplyDelta

        inner = getattr(event, "event", event)  # the channel's envelope
        if isinstance(inner, ReplyDelta):
            self.deltas.put_nowait(inner.delta)


_RUNNING: set[asyncio.Task[Any]] = set()
"""Tasks of turns in flight (a client that leaves does not stop its turn; this keeps the task alive)."""
_DIRECT: set[EngineRunHandle] = set()
"""Runs started outside the broker (another session): the broker's ``close`` does not see them."""


async def stop_direct_runs(reason: str = "the server is shutting down") -> None:
    """Abort the runs chat completions started in other sessions and wait until their turns are written."""
    handles = list(_DIRECT)
    for handle in handles:
        handle.abort(reason)
    await asyncio.gather(*(handle.result() for handle in handles), return_exceptions=True)


def _spawn(turn: ChatTurn, coro: Any) -> None:
    task: asyncio.Task[RunOutcome] = asyncio.get_running_loop().create_task(coro)
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    task.add_done_callback(lambda _: turn.deltas.put_nowait(None))
    turn.outcome = task


async def start_chat_turn(
    state: ServerState,
    agent: AgentRow,
    session_label: str,
    prompt: str,
    completion_id: str,
    *,
    max_tokens: int | None = None,
) -> ChatTurn:
    """Start the turn (errors a client can fix are raised here, before any byte is streamed).

    ``max_tokens`` bounds each model call of the turn (the run's ``spec``; through the broker, the
    message's ``metadata``, which the broker passes to the run that consumes it alone).
    """
    runner = state.runner
    if state.broker is None or runner is None:
        raise ApiError(409, "no_broker", "no broker runs in this server process: start it with nexus serve")
    if session_label != agent.session_label:  # an alias names its session: run under the real label
        session_label = state.ledger.ensure_session(session_label).label
    turn = ChatTurn(session_label)
    if session_label == agent.session_label:
        limit = {"max_tokens": max_tokens} if max_tokens else {}
        await _through_broker(state, runner, agent, prompt, completion_id, turn, limit)
    else:
        role = "manager" if agent.role == "manager" else "worker"
        spec = {**agent.spec, "max_tokens": max_tokens} if max_tokens else agent.spec
        request = RunRequest(agent.agent_id, session_label, prompt, (), sender=None, spec=spec, role=role)
        handle = runner.start(request)
        handle.on_event(turn.listen)
        _DIRECT.add(handle)
        _spawn(turn, _direct(handle))
    return turn


async def _direct(handle: EngineRunHandle) -> RunOutcome:
    try:
        return await handle.result()
    finally:
        _DIRECT.discard(handle)


async def _through_broker(
    state: ServerState,
    runner: EngineRunner,
    agent: AgentRow,
    prompt: str,
    completion_id: str,
    turn: ChatTurn,
    metadata: dict[str, Any],
) -> None:
    from nexus.broker import AgentMessage
    from nexus.server._messages import ensure_in_broker

    assert state.broker is not None
    ensure_in_broker(state, agent.agent_id)
    item_ids: set[str] = set()
    handles: asyncio.Queue[EngineRunHandle] = asyncio.Queue()

    def on_run(handle: EngineRunHandle) -> None:
        if item_ids.intersection(handle.request.item_ids):
            handle.on_event(turn.listen)
            handles.put_nowait(handle)

    remove = runner.on_run(on_run)
    try:
        message = AgentMessage(completion_id, "user", agent.agent_id, prompt, metadata=metadata)
        receipt = await state.broker.send(message, "followup")
    except BaseException:
        remove()
        raise
    # No run can have taken the item yet: the drain starts it only after send returned to us.
    item_ids.add(receipt.queue_item_id)
    _spawn(turn, _settled(state, receipt.queue_item_id, handles, remove))


async def _settled(
    state: ServerState, item_id: str, handles: asyncio.Queue[EngineRunHandle], remove: Any
) -> RunOutcome:
    """Wait for the run that takes the item (or for the item to fail or be dropped without one).

    A run aborted before its turn started (shutdown, an interrupt) ends the completion as
    aborted; the broker keeps the message queued and runs it later, in the agent's session.
    """
    try:
        while True:
            try:
                handle = await asyncio.wait_for(handles.get(), SETTLED_POLL_S)
            except TimeoutError:
                item = state.store.get_item(item_id)
                if item is not None and item.status in ("failed", "dropped"):
                    return RunOutcome(status="failed", error=item.error or f"the message was {item.status}")
                continue
            return await handle.result()
    finally:
        remove()
