"""One OpenAI-style chat completion as a turn of an agent, read from the run's own event channel.

Two ways in, chosen by the session the request names (see docs/server.md, "Which session"):

- the agent's own session: the prompt is sent through the broker like any message (mode
  ``followup``, so it is one turn of its own, queued behind whatever the agent is doing, durable
  and idempotent on the completion id); its receipt hands over the run that takes it;
- another session (``X-Nexus-Session`` or ``user``): ``Runtime.start`` runs the turn there at once,
  under that session's lock, with the agent's spec (model, tools, instructions).

Either way the completion subscribes to the run the moment it has it, so no text is missed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from nexus.ledger import NewSession
from nexus.server._errors import ApiError

if TYPE_CHECKING:
    from nexus.broker import SendReceipt
    from nexus.engine import AgentResult, Execution, Subscription
    from nexus.ledger import AgentRow
    from nexus.server._state import ServerState

_DIRECT: set[Execution] = set()
"""Runs started outside the broker (another session): the broker's ``close`` does not see them."""


@dataclass(slots=True)
class ChatTurn:
    """A completion's turn: the session it runs in, and (once it starts) the run with a subscription to it."""

    session_label: str
    run: asyncio.Future[tuple[Execution, Subscription] | None]
    """The run and its events from the start; ``None`` when the message never ran (``receipt`` says why).
    A run aborted before its turn started (shutdown, an interrupt) ends the completion as aborted; the
    broker keeps the message queued and runs it later, in the agent's session."""
    receipt: SendReceipt | None = None

    async def failure(self) -> str:
        """Why the message did not run (dropped, failed before a run)."""
        if self.receipt is None:
            return "the run did not start"
        return (await self.receipt.outcome()).error or "the message was not run"


async def stop_direct_runs(reason: str = "the server is shutting down") -> None:
    """Abort the runs chat completions started in other sessions and wait until their turns are written."""
    runs = list(_DIRECT)
    for execution in runs:
        execution.abort(reason)
    await asyncio.gather(*(execution.result for execution in runs), return_exceptions=True)


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

    ``max_tokens`` bounds each model call of the turn (the run's spec; through the broker, the
    message's ``metadata``, which the broker passes to the run that consumes it alone).
    """
    runtime = state.runtime
    if state.broker is None or runtime is None:
        raise ApiError(409, "no_broker", "no broker runs in this server process: start it with nexus serve")
    if session_label != agent.session_label:  # an alias names its session: run under the real label
        session_label = (await state.ledger.sessions.ensure(NewSession(session_label))).label
    loop = asyncio.get_running_loop()
    if session_label == agent.session_label:
        limit = {"max_tokens": max_tokens} if max_tokens else {}
        receipt = await _through_broker(state, agent, prompt, completion_id, limit)
        return ChatTurn(session_label, receipt.follow(), receipt)
    from nexus.broker import stored_agent

    _, spec = stored_agent(agent)
    execution = await runtime.begin(replace(spec, max_tokens=max_tokens) if max_tokens else spec, session_label, prompt)
    _DIRECT.add(execution)
    execution.result.add_done_callback(lambda _: _DIRECT.discard(execution))
    run: asyncio.Future[tuple[Execution, Subscription] | None] = loop.create_future()
    run.set_result((execution, execution.subscribe()))
    return ChatTurn(session_label, run)


async def _through_broker(
    state: ServerState, agent: AgentRow, prompt: str, completion_id: str, metadata: dict[str, Any]
) -> SendReceipt:
    from nexus.broker import AgentMessage
    from nexus.server._messages import ensure_in_broker

    assert state.broker is not None
    ensure_in_broker(state, agent.agent_id)
    message = AgentMessage(completion_id, "user", agent.agent_id, prompt, metadata=metadata)
    return await state.broker.send(message, "followup")


async def finished(turn: ChatTurn) -> tuple[AgentResult | None, str | None]:
    """The run's result, or why there is none (the message never ran, or its run raised)."""
    followed = await turn.run
    if followed is None:
        return None, await turn.failure()
    execution, _ = followed
    try:
        return await execution.result, None
    except Exception as exc:  # e.g. its final write failed: the completion fails with the reason
        return None, str(exc)


async def texts(turn: ChatTurn, heartbeat_s: float) -> AsyncIterator[str | None]:
    """The reply's text deltas as they stream; ``None`` after each ``heartbeat_s`` of silence."""
    run = asyncio.ensure_future(turn.run)
    while not run.done():
        try:
            await asyncio.wait_for(asyncio.shield(run), heartbeat_s)
        except TimeoutError:
            yield None
    followed = run.result()
    if followed is None:
        return
    events = followed[1]
    while True:
        try:
            item = await events.next(heartbeat_s)
        except StopAsyncIteration:
            return
        if item is None:
            yield None
        elif item.type == "reply_delta":
            yield item.event.delta
