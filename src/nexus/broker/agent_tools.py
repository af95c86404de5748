"""The tools an agent uses to reach other agents (seed 003 §4.3 names and parameters).

``send_message_to_agent{to, content, waitForReply}``, ``get_agent_status{agentId}`` and
``list_agents{}``. A tool error (unknown agent, a message to itself, the hop limit) is a result
the model reads, never an exception that ends the run. Loops between agents are bounded: every
message carries its conversation id and a hop count, and a send past ``max_hops`` is refused and
reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from nexus.agent import AgentTool, AgentToolResult, ToolUpdateFn
from nexus.broker._hops import ConversationHops
from nexus.broker.types import AgentMessage, BrokerError, RegisteredAgent, SendAndWaitResult, SendReceipt
from nexus.ledger import new_ulid
from nexus.llm import AbortSignal

DEFAULT_MAX_HOPS = 8
DEFAULT_REPLY_TIMEOUT_MS = 600_000


class Messenger(Protocol):
    """What the tools need of the broker (``AgentBroker`` is one); a Protocol, so the broker that
    builds the tools for each run and the tools do not import each other."""

    def get_agent(self, agent_id: str) -> RegisteredAgent | None: ...

    def list_agents(self) -> list[RegisteredAgent]: ...

    async def send(self, message: AgentMessage, queue_mode: str | None = None) -> SendReceipt: ...

    async def send_and_wait(self, message: AgentMessage, timeout_ms: int | None = None) -> SendAndWaitResult: ...

    @property
    def hops(self) -> ConversationHops:
        """The highest hop each conversation reached: a new message is numbered one past it."""
        ...


@dataclass(frozen=True, slots=True)
class CallerContext:
    """Who is calling the tools, and which conversation the current turn belongs to."""

    agent_id: str
    conversation_id: str | None
    """``None``: the turn starts no conversation until its first send (then one id for all its sends)."""
    hop: int = 0
    max_hops: int = DEFAULT_MAX_HOPS
    reply_timeout_ms: int = DEFAULT_REPLY_TIMEOUT_MS
    session: str | None = None
    """The session key of the calling turn (a chat sender's): a reply that comes later goes back there."""
    deliver_to: dict[str, object] | None = None
    """The chat the calling turn answers: the turn that reads a later reply answers that chat too."""


def agent_tools(broker: Messenger, caller: CallerContext) -> list[AgentTool]:
    """The broker tools bound to one calling agent's turn."""
    return [caller_tool(broker, caller), *broker_tools(broker)]


def broker_tools(broker: Messenger) -> list[AgentTool]:
    """The tools that are the same for every caller (status, list): a broker builds them once, not per run."""
    return [_status_tool(broker), _list_tool(broker)]


_SEND_DESCRIPTION = (
    "Send a message to another agent. With waitForReply the call returns the agent's reply; "
    "without it the reply arrives later as a message from that agent."
)

_SEND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "Target agent ID"},
        "content": {"type": "string", "description": "Message content"},
        "waitForReply": {"type": "boolean", "default": False, "description": "Wait for the reply"},
    },
    "required": ["to", "content"],
}


def caller_tool(broker: Messenger, caller: CallerContext) -> AgentTool:
    """``send_message_to_agent`` bound to ``caller``'s turn (it carries the caller and the turn's conversation)."""
    # Positional (name, description, parameters, execute, label): a class called with keywords builds a dict of
    # them and unpacks it again.
    execute = _SendTool(broker, caller).execute
    return AgentTool("send_message_to_agent", _SEND_DESCRIPTION, _SEND_PARAMETERS, execute, "Message agent")


def conversation_started(tool: AgentTool) -> bool:
    """Whether ``tool`` (a :func:`caller_tool`) started its turn's conversation (its first send made the id): until
    then it holds nothing of a turn, and a later turn of the same caller may use it as it is (``True`` for any
    other tool)."""
    sender = getattr(tool.execute, "__self__", None)
    return not isinstance(sender, _SendTool) or sender.conversation is not None


class _SendTool:
    """``send_message_to_agent`` of one caller: the turn's conversation is the caller's, or one made at the
    first send (a turn that sends nothing costs no id)."""

    __slots__ = ("broker", "caller", "conversation")

    def __init__(self, broker: Messenger, caller: CallerContext) -> None:
        self.broker, self.caller, self.conversation = broker, caller, caller.conversation_id

    def conversation_id(self) -> str:
        if self.conversation is None:
            self.conversation = new_ulid()
        return self.conversation

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        broker, caller = self.broker, self.caller
        target = str(args.get("to", "")).strip()
        content = str(args.get("content", ""))
        wait = bool(args.get("waitForReply", False))
        refused = _refused(broker, caller, target, self.conversation_id)
        if refused is not None:
            return refused
        message = _message(caller, call_id, target, content, wait, self.conversation_id(), broker.hops)
        try:
            if not wait:
                receipt = await broker.send(message, "followup")
                return AgentToolResult.text(
                    f"Sent to {target} (message {receipt.message_id}). Its reply will arrive as a message from "
                    f"{target}.",
                    details={"message_id": receipt.message_id, "queue_item_id": receipt.queue_item_id},
                )
            result = await broker.send_and_wait(message, timeout_ms=caller.reply_timeout_ms)
        except BrokerError as exc:
            return AgentToolResult.text(f"Could not send to {target}: {exc}", is_error=True)
        if not result.success:
            return AgentToolResult.text(f"{target} did not answer: {result.error}", is_error=True)
        return AgentToolResult.text(result.reply or "(no text reply)", details={"turn_id": result.turn_id})


def _refused(
    broker: Messenger, caller: CallerContext, target: str, conversation_id: Callable[[], str]
) -> AgentToolResult | None:
    """Why ``caller`` may not send to ``target`` (itself, an unknown agent, past the hop limit), or ``None``."""
    if target == caller.agent_id:
        return AgentToolResult.text("You cannot send a message to yourself.", is_error=True)
    if broker.get_agent(target) is None:
        known = ", ".join(a.identity.agent_id for a in broker.list_agents() if a.identity.agent_id != caller.agent_id)
        return AgentToolResult.text(f"No agent named {target!r}. Known agents: {known or 'none'}.", is_error=True)
    reached = broker.hops.highest(conversation_id(), caller.hop)  # the conversation's, not only this chain's
    if reached + 1 > caller.max_hops:
        return AgentToolResult.text(
            f"Hop limit reached: your message to {target} was not sent. Conversation {conversation_id()} has "
            f"already sent {reached} asks between agents (their replies are not counted) and the limit is "
            f"{caller.max_hops} (the max_hops setting of [broker] in nexus.toml). Answer with what you have instead "
            "of delegating again.",
            is_error=True,
            details={"hop_limit": caller.max_hops, "conversation_id": conversation_id()},
        )
    return None


def _message(
    caller: CallerContext,
    call_id: str,
    target: str,
    content: str,
    wait: bool,
    conversation_id: str,
    hops: ConversationHops,
) -> AgentMessage:
    """The message a tool call sends: one hop past the conversation's highest; without ``wait`` it says where
    the reply goes."""
    later = {"reply_to": caller.agent_id, "reply_session": caller.session, "reply_deliver_to": caller.deliver_to}
    return AgentMessage(
        id=f"{caller.agent_id}:{call_id}:{new_ulid()}",
        from_=caller.agent_id,
        to=target,
        content=content,
        conversation_id=conversation_id,
        metadata={"hop": hops.take(conversation_id, caller.hop), **({"reply_to": None} if wait else later)},
    )


def _status_tool(broker: Messenger) -> AgentTool:
    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        agent_id = str(args.get("agentId", "")).strip()
        agent = broker.get_agent(agent_id)
        if agent is None:
            return AgentToolResult.text(f"No agent named {agent_id!r}.", is_error=True)
        status = {"agentId": agent_id, "state": agent.state, "queueDepth": agent.queue_depth}
        return AgentToolResult.text(json.dumps(status), details=status)

    return AgentTool(
        name="get_agent_status",
        description="Check if an agent is available: its state (idle, running, streaming, compacting) and queue.",
        parameters={
            "type": "object",
            "properties": {"agentId": {"type": "string", "description": "The agent to check"}},
            "required": ["agentId"],
        },
        execute=execute,
        label="Agent status",
    )


def _list_tool(broker: Messenger) -> AgentTool:
    async def execute(
        call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdateFn
    ) -> AgentToolResult:
        agents = [
            {"agentId": a.identity.agent_id, "role": a.identity.role, "state": a.state, "queueDepth": a.queue_depth}
            for a in broker.list_agents()
        ]
        return AgentToolResult.text(json.dumps(agents), details={"agents": agents})

    return AgentTool(
        name="list_agents",
        description="List the registered agents with their roles and states.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        label="List agents",
    )
