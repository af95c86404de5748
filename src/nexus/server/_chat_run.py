"""One OpenAI-style chat completion as a turn of an agent, read from the run's own event channel.

Two ways in, chosen by the session the request names (see docs/server.md, "Which session"):

- the agent's own session: the prompt is sent through the broker like any message (mode
  ``followup``, so it is one turn of its own, queued behind whatever the agent is doing, durable
  and idempotent on the completion id); its receipt hands over the run that takes it;
- another session (``X-Nexus-Session`` or ``user``): the broker starts the turn there beside its queues
  (:meth:`~nexus.broker.AgentBroker.run_beside`: ``Runtime.begin``, under that session's lock, with the
  agent's spec — model, tools, instructions) as soon as one of its ``max_concurrent`` seats is free; the
  agent's abort reaches it, its state shows it, the broker's close aborts it.

Either way the completion subscribes to the run the moment it has it, so no text is missed.
A turn that did not finish is never answered as a reply (:func:`refusal`): a turn cut by the
server's stop, or a message still waiting when it stopped, is a 503; a turn aborted otherwise a 409;
a message the queue cap dropped a 429 (:func:`dropped`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from nexus.ledger import NewSession
from nexus.server._errors import ApiError
from nexus.server._off_loop import store_call

if TYPE_CHECKING:
    from nexus.agent import AgentTool
    from nexus.broker import SendReceipt
    from nexus.engine import AgentResult, Execution, Subscription
    from nexus.ledger import AgentRow
    from nexus.server._state import ServerState

STOP_RETRY_AFTER_S = 5
"""``Retry-After`` of a completion cut by the server's stop: a restart takes seconds."""


@dataclass(slots=True)
class ChatTurn:
    """A completion's turn: the session it runs in, and (once it starts) the run with a subscription to it."""

    state: ServerState
    session_label: str
    run: asyncio.Future[tuple[Execution, Subscription] | None]
    """The run and its events from the start; ``None`` when the message never ran (``receipt`` says why).
    A run aborted before its turn started (shutdown, an interrupt) ends the completion as aborted; the
    broker keeps the message queued and runs it later, in the agent's session."""
    receipt: SendReceipt | None = None
    why: str | None = None
    """Why a run in another session did not start (its ``Runtime.begin`` raised)."""

    async def failure(self) -> str:
        """Why the message did not run (dropped, failed before a run)."""
        if self.receipt is None:
            return self.why or "the run did not start"
        return (await self.receipt.outcome()).error or "the message was not run"


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
    if state.broker is None or state.runtime is None:
        raise ApiError(409, "no_broker", "no broker runs in this server process: start it with nexus serve")
    if session_label != agent.session_label:  # an alias names its session: run under the real label
        session_label = (await state.ledger.sessions.ensure(NewSession(session_label))).label
    if session_label == agent.session_label:
        limit = {"max_tokens": max_tokens} if max_tokens else {}
        receipt = await _through_broker(state, agent, prompt, completion_id, limit)
        return ChatTurn(state, session_label, receipt.follow(), receipt)
    return await _beside_broker(state, agent, session_label, prompt, max_tokens)


async def _beside_broker(
    state: ServerState, agent: AgentRow, session_label: str, prompt: str, max_tokens: int | None
) -> ChatTurn:
    """The turn in another session, started by the broker beside its queues once a seat is free.

    The model is checked here (a ``ConfigError`` before any byte is streamed); the run subscribes
    the moment it starts, so no text is missed."""
    from nexus.broker import stored_agent
    from nexus.server._messages import ensure_in_broker

    assert state.broker is not None and state.runtime is not None
    runtime = state.runtime
    _, spec = stored_agent(agent)
    spec = replace(spec, max_tokens=max_tokens) if max_tokens else spec
    runtime.checked_model(spec)
    await ensure_in_broker(state, agent.agent_id)
    turn = ChatTurn(state, session_label, asyncio.get_running_loop().create_future())

    async def begin(tools: list[AgentTool]) -> Execution:
        try:  # the broker's agent tools, as a queued turn has them: the run may ask another agent
            execution = await runtime.begin(spec, session_label, prompt, tools=tools)
        except Exception as exc:
            turn.why = str(exc) or type(exc).__name__
            turn.run.set_result(None)
            raise
        turn.run.set_result((execution, execution.subscribe()))
        return execution

    started = state.broker.run_beside(agent.agent_id, begin, session=session_label)
    started.add_done_callback(lambda done: done.cancelled() or done.exception())  # begin's error: said by the turn
    return turn


async def _through_broker(
    state: ServerState, agent: AgentRow, prompt: str, completion_id: str, metadata: dict[str, Any]
) -> SendReceipt:
    from nexus.broker import AgentMessage
    from nexus.server._messages import ensure_in_broker

    assert state.broker is not None
    await ensure_in_broker(state, agent.agent_id)
    message = AgentMessage(completion_id, "user", agent.agent_id, prompt, metadata=metadata)
    return await state.broker.send(message, "followup")


async def handed(turn: ChatTurn) -> tuple[Execution, Subscription] | None:
    """The run that took the message (``None``: it never ran).

    Raises a 503 when the server stopped first: the message stays queued and runs at the next
    start, so the SDK is told not to send it again by itself (that would run it twice).
    """
    if not turn.run.done():
        stopped = asyncio.ensure_future(turn.state.runs_stopped.wait())
        try:
            await asyncio.wait((turn.run, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
    if turn.run.done():
        return turn.run.result()
    if turn.receipt is None:  # a turn in another session that waited for a seat: nothing of it was written
        raise ApiError(
            503, "unavailable", "the server is shutting down: the turn did not start; send it again once it is back",
            headers={"Retry-After": str(STOP_RETRY_AFTER_S)},
        )  # fmt: skip
    message_id = turn.receipt.message_id
    raise ApiError(
        503, "unavailable",
        f"the server is shutting down: the message ({message_id}) stays queued and runs when the server starts "
        f"again, in session {turn.session_label!r}; sending it again would run it twice",
        headers={"Retry-After": str(STOP_RETRY_AFTER_S), "x-should-retry": "false"},
    )  # fmt: skip


async def finished(turn: ChatTurn) -> tuple[AgentResult | None, str | None]:
    """The run's result, or why there is none (the message never ran, or its run raised)."""
    followed = await handed(turn)
    if followed is None:
        return None, await turn.failure()
    execution, _ = followed
    try:
        return await execution.result, None
    except Exception as exc:  # e.g. its final write failed: the completion fails with the reason
        return None, str(exc)


async def dropped(turn: ChatTurn) -> ApiError | None:
    """The error for a message that never ran because it was dropped (the queue cap, a cleared queue), or ``None``.

    Nothing failed upstream, so no 502; and a resend is no repair: the message was accepted, then
    dropped — under ``summarize`` the agent is told of it in its next turn's ``[Queue overflow]``
    summary — so the SDK is told not to resend it by itself (it retries 409, 429 and 5xx).
    """
    if turn.receipt is None:
        return None
    item_id = turn.receipt.queue_item_id
    item = await store_call(turn.state, lambda: turn.state.store.get_item(item_id))
    if item is None or item.status != "dropped":
        return None
    reason = item.error or "dropped"
    headers = {"x-should-retry": "false"}
    if not reason.startswith("queue cap"):  # e.g. the queue was cleared: someone dropped it on purpose
        return ApiError(409, "dropped", f"the message was dropped: {reason}", headers=headers)
    told = (
        "the agent is told of it, in one line, in its next turn's [Queue overflow] summary"
        if "summarize" in reason
        else "the agent will not see it"
    )
    return ApiError(
        429, "queue_full",
        f"the message was dropped: {reason}, as the agent's queue was full; {told}. Sending it again "
        f"queues it again",
        headers=headers,
    )  # fmt: skip


async def refusal(turn: ChatTurn, result: AgentResult) -> ApiError | None:
    """The error for a turn that ran but did not finish (``aborted``), or ``None``.

    Its partial reply is no answer: cut by the server's stop it is a 503 (sending it again once the
    server is back is a new turn, after the aborted one); aborted on request or by an interrupt, a
    409 the SDK does not retry (someone stopped it on purpose).
    """
    if result.status != "aborted":
        return None
    kept = f"its partial reply is kept in session {turn.session_label!r}"
    if turn.state.stopping.is_set():
        return ApiError(
            503, "unavailable", f"the server is shutting down: the agent's turn was aborted ({kept})",
            headers={"Retry-After": str(STOP_RETRY_AFTER_S)},
        )  # fmt: skip
    written = (await turn.state.ledger.turns.get(result.turn_id)).error if result.turn_id is not None else None
    why = (written or {}).get("message") or "aborted"  # "aborted on request", "interrupted by message …"
    return ApiError(
        409, "aborted", f"the agent's turn was aborted: {why} ({kept})", headers={"x-should-retry": "false"}
    )


async def texts(turn: ChatTurn, heartbeat_s: float) -> AsyncIterator[str | None]:
    """The reply's text deltas as they stream; ``None`` after each ``heartbeat_s`` of silence. The texts of two
    model calls (one before tool calls, one after) are kept apart by a blank line.

    Raises :func:`handed`'s 503 when the server stops before a run takes the message."""
    while True:
        try:
            followed = await asyncio.wait_for(handed(turn), heartbeat_s)
            break
        except TimeoutError:
            yield None
    if followed is None:
        return
    events = followed[1]
    spoke = apart = False  # a text streamed already; the next one comes from a later model call (after tools)
    while True:
        try:
            item = await events.next(heartbeat_s)
        except StopAsyncIteration:
            return
        if item is None:
            yield None
        elif item.type == "reply_delta":
            delta = item.event.delta
            if apart and delta:  # as `nexus run` starts it on a new line: "Let me look.Found it." read as one
                delta, apart = "\n\n" + delta, False
            spoke = spoke or bool(delta)
            yield delta
        elif item.type == "message_start" and spoke and item.event.message.role == "assistant":
            apart = True
