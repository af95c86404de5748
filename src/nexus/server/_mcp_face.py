"""Nexus as an MCP server: any MCP client (Claude Desktop, Cursor, pi…) can talk to Nexus agents.

Tools:

- ``list_agents``: the registered agents, their model, state and queue depth;
- ``send_message``: a message to an agent through the broker's durable queue (idempotent on
  ``id``); with ``wait`` (the default) the call lasts until the turn that consumed it ends and
  returns its reply, sending the reply's text as progress notifications while it streams;
- ``list_sessions``, ``get_history`` (a session's last turns, as a transcript), ``fork_session``.

Resources: ``nexus://sessions`` (every session), ``nexus://sessions/{label}`` (a session's history
with every message) and ``nexus://turns/{turn_id}`` (one turn, its messages and tool calls).

Built on the same :class:`ServerState` as the HTTP API, for ``/mcp`` on ``nexus serve``
(:mod:`nexus.server.mcp_http`) and for ``nexus mcp serve`` over stdio. The SDK's ``MCPServer`` does
the protocol; this module only says what each tool does.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context, MCPServer  # the SDK reads the tools' annotations from this module

from nexus import __version__
from nexus.server._off_loop import store_call

if TYPE_CHECKING:
    from nexus.server._state import ServerState

INSTRUCTIONS = """\
Nexus runs LLM agents with a durable history. Use list_agents to see who is there, send_message to
talk to one (it waits for the reply by default), get_history to read what was said in a session and
fork_session to branch a conversation at any turn. Every turn is kept; nothing you send is lost."""

PROGRESS_EVERY_S = 0.1
"""Streamed text is sent as progress at most this often (tokens are coalesced in between)."""

MAX_WAIT_S = 3600.0


def build_face(state: ServerState) -> MCPServer:
    """The MCP server over ``state`` (see the module docstring)."""
    server = MCPServer("nexus", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    _agent_tools(server, state)
    _session_tools(server, state)
    _resources(server, state)
    return server


def _fail(exc: Exception) -> Exception:
    """The SDK's ToolError with our message (any other exception would reach the client as 'Error executing tool')."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    from nexus.ledger import SessionNotFound
    from nexus.server._errors import validation_message

    if isinstance(exc, SessionNotFound):
        return ToolError(f"no session named {exc.label!r}: list_sessions shows the sessions")
    if isinstance(exc, ValidationError):  # its own text is pydantic's, with a link to pydantic's site
        return ToolError(validation_message(exc))
    return ToolError(getattr(exc, "message", None) or str(exc))


def _limit(limit: int, most: int) -> int:
    """A tool's ``limit``, refused outside 1..``most`` (it was clamped: ``-1`` answered as 1)."""
    if not 1 <= limit <= most:
        raise ValueError(f"limit must be from 1 to {most}, got {limit}")
    return limit


def _agent_tools(server: MCPServer, state: ServerState) -> None:
    from nexus.server._views import agent_loads, agent_view

    @server.tool(description="The registered agents: id, role, model, tools, state and waiting messages.")
    async def list_agents() -> dict[str, Any]:
        load = agent_loads(await state.ledger.queue.items(statuses=("queued", "processing")), state.broker)
        return {"agents": [agent_view(row, **load(row.agent_id)) for row in await state.ledger.agents.list()]}

    @server.tool(
        description=(
            "Send a message to an agent. It is queued durably (a retry with the same id is recognised and "
            "answered with the first one's outcome). With wait=true (default) the call returns the reply of "
            "the turn that consumed the message, streaming its text as progress; with wait=false it returns "
            "at once with the queue item id. session: a per-sender session key (default: the agent's own). "
            "mode: steer, followup, collect, steer-backlog, queue or interrupt (default: the agent's)."
        )
    )
    async def send_message(
        agent: str,
        content: str,
        ctx: Context,
        id: str | None = None,
        session: str | None = None,
        mode: str | None = None,
        wait: bool = True,
        timeout_s: float = 600.0,
    ) -> dict[str, Any]:
        try:
            return await _send(state, ctx, agent, content, id, session, mode, wait, timeout_s)
        except Exception as exc:
            raise _fail(exc) from None


async def _send(
    state: ServerState,
    ctx: Context,
    agent: str,
    content: str,
    message_id: str | None,
    session: str | None,
    mode: str | None,
    wait: bool,
    timeout_s: float,
) -> dict[str, Any]:
    from nexus.server._mcp_runs import send_and_wait
    from nexus.server._messages import MessageRequest, accept_message

    body = MessageRequest.model_validate({"content": content, "id": message_id, "session": session, "mode": mode})
    if not wait:
        return await accept_message(
            state, agent, body.content, mode=body.mode, message_id=body.id, sender="user", session=body.session
        )
    if not 0 < timeout_s <= MAX_WAIT_S:
        raise ValueError(f"timeout_s must be more than 0 and at most {MAX_WAIT_S:g} seconds, got {timeout_s:g}")
    progress = _Progress(ctx)
    try:
        reply = await send_and_wait(
            state, agent, body.content, message_id=body.id, session=body.session, mode=body.mode,
            timeout_s=timeout_s, on_text=progress.add,
        )  # fmt: skip
    finally:
        await progress.close()
    return reply.as_dict()


class _Progress:
    """Streamed text as MCP progress notifications: coalesced, at most every :data:`PROGRESS_EVERY_S`."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._pending: list[str] = []
        self._sent = 0
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._pump())

    def add(self, text: str) -> None:
        self._pending.append(text)
        self._wake.set()

    async def _pump(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._flush()
            await asyncio.sleep(PROGRESS_EVERY_S)

    async def _flush(self) -> None:
        if not self._pending:
            return
        text, self._pending = "".join(self._pending), []
        self._sent += len(text)
        try:
            await self._ctx.report_progress(self._sent, None, text)
        except Exception:  # the client went away: the turn goes on, its reply stays in the ledger
            self._pending.clear()

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._flush()


def _session_tools(server: MCPServer, state: ServerState) -> None:
    from nexus.ledger import SessionQuery
    from nexus.ledger import fork_session as fork_at
    from nexus.server._owners import Owners
    from nexus.server._views import session_view

    ledger = state.ledger

    @server.tool(description="Sessions, most recently updated first (label, head turn, origin).")
    async def list_sessions(limit: int = 50) -> dict[str, Any]:
        try:
            sessions = await ledger.sessions.list(SessionQuery(status="active", limit=_limit(limit, 1000)))
        except Exception as exc:
            raise _fail(exc) from None
        owners = Owners(await store_call(state, state.store.list_agents))
        return {"sessions": [session_view(s, owners) for s in sessions]}

    @server.tool(description="The last turns of a session as a transcript: who said what, which tools ran.")
    async def get_history(session: str, limit: int = 20) -> dict[str, Any]:
        try:
            most = _limit(limit, 500)  # a wrong argument is said first, whatever the session
            label = (await ledger.sessions.resolve(session)).label
            turns = await ledger.turns.path(label, limit=most)
        except Exception as exc:
            raise _fail(exc) from None
        return {"session": label, "turns": [await _transcript_turn(state, turn) for turn in turns]}

    @server.tool(
        description=(
            "Fork a session: a new session whose history is the given one up to turn_id (default: its "
            "latest turn). Nothing is copied; the original is unchanged. Without a label it is named "
            "<session>-fork-1, -2, ... Returns the new session."
        )
    )
    async def fork_session(session: str, turn_id: str | None = None, label: str | None = None) -> dict[str, Any]:
        try:
            found = await ledger.sessions.resolve(session)
            at = turn_id or found.thread_id
            if at is None:
                raise ValueError(f"session {found.label!r} has no turns yet: there is nothing to fork")
            fork = await fork_at(ledger, at, of=found.label, label=label or None)  # the rule every door uses
            return session_view(fork, Owners(await store_call(state, state.store.list_agents)))
        except Exception as exc:
            raise _fail(exc) from None


async def _transcript_turn(state: ServerState, turn: Any) -> dict[str, Any]:
    """One turn as an LLM client reads it best: its messages as role + text, tool calls by name."""
    from nexus.llm import AssistantMessage, TextContent

    lines = []
    for stored in await state.ledger.turns.messages(turn.id):
        message = stored.message
        content = message.content
        text = content if isinstance(content, str) else "".join(b.text for b in content if isinstance(b, TextContent))
        entry: dict[str, Any] = {"role": stored.role, "text": text}
        if isinstance(message, AssistantMessage) and message.tool_calls:
            entry["tool_calls"] = [f"{c.name}({json.dumps(c.arguments)[:200]})" for c in message.tool_calls]
        lines.append(entry)
    return {"turn_id": turn.id, "status": turn.status, "model": turn.model, "started_at": turn.started_at,
            "messages": lines}  # fmt: skip


def _resources(server: MCPServer, state: ServerState) -> None:
    from nexus.ledger import SessionQuery
    from nexus.server._owners import Owners
    from nexus.server._views import message_view, session_view, tool_call_view, turn_view

    ledger = state.ledger

    @server.resource("nexus://sessions", name="sessions", mime_type="application/json",
                     description="Every active session, most recently updated first.")  # fmt: skip
    async def sessions() -> str:
        owners = Owners(await store_call(state, state.store.list_agents))
        listed = await ledger.sessions.list(SessionQuery("active"))
        return json.dumps({"sessions": [session_view(s, owners) for s in listed]})

    @server.resource("nexus://sessions/{label}", name="session", mime_type="application/json",
                     description="A session's history: its turns, root first, with every message.")  # fmt: skip
    async def session_history(label: str) -> str:
        session = await _resource_call(ledger.sessions.resolve(label))
        history = [
            {**turn_view(t), "messages": [message_view(m) for m in await ledger.turns.messages(t.id)]}
            for t in await ledger.turns.path(session.label)
        ]
        return json.dumps({"label": session.label, "turns": history})

    @server.resource("nexus://turns/{turn_id}", name="turn", mime_type="application/json",
                     description="One turn: its messages, tool calls, tokens and cost.")  # fmt: skip
    async def turn(turn_id: str) -> str:
        found = await _resource_call(ledger.turns.get(turn_id))
        return json.dumps({
            **turn_view(found),
            "messages": [message_view(m) for m in await ledger.turns.messages(found.id)],
            "tool_calls": [tool_call_view(c) for c in await ledger.turns.tool_calls(found.id)],
        })  # fmt: skip


async def _resource_call(read: Any) -> Any:
    """``await read``; a ledger lookup that finds nothing is the SDK's "resource not found" with our message."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    from nexus.ledger import SessionNotFound

    try:
        return await read
    except SessionNotFound as exc:  # its own text names the Python API (ledger.sessions.list())
        raise ResourceNotFoundError(f"no session named {exc.label!r}: nexus://sessions lists them") from None
    except LookupError as exc:
        raise ResourceNotFoundError(str(exc)) from None
