"""What ``nexus send`` tells a sender whose message joined a queue already past its cap, or pushed others out.

A message handed to another process's broker (it holds the broker lock) is accepted durably at
once, and the cap applies later, when that broker loads it: a sender that exited after
"accepted" never heard that its message, or older ones, were then dropped (a trial's 100
concurrent ``nexus send``: all said "accepted", 79 ended ``dropped``). The sender cannot know
which ones the cap will take, but it can say the queue is past its cap and where to look.
"""

from __future__ import annotations

from nexus.broker import QueueOverrides, QueueSettings, resolve_settings
from nexus.config import NexusConfig
from nexus.ledger import QueueItem


def over_cap_hint(config: NexusConfig, pending: list[QueueItem], agent_id: str, session_label: str) -> str | None:
    """A line for the sender when more messages wait in the session than its queue cap; ``None`` otherwise."""
    waiting = sum(1 for item in pending if item.session_label == session_label and item.status == "queued")
    table = config.agents.get(agent_id)  # the agent's [agents.X] queue over [broker]'s, as its broker merges them
    agent = QueueOverrides(cap=table.queue.cap, drop_policy=table.queue.drop_policy) if table is not None else None
    default = QueueSettings(cap=config.broker.cap, drop_policy=config.broker.drop_policy)
    settings = resolve_settings(agent, default=default)
    if waiting <= settings.cap:
        return None
    return (
        f"nexus: {waiting} messages wait for {agent_id} in {session_label}, past its queue cap of {settings.cap} "
        f"(drop policy '{settings.drop_policy}'): some may be dropped before a turn takes them; "
        f"`nexus queue list {agent_id} --all` shows what became of each"
    )


def pushed_out_line(agent_id: str, message_ids: list[str]) -> str:
    """The line for a sender whose message made a running ``nexus serve`` drop older ones (its cap applies at once:
    a trial's 100 concurrent sends all said "accepted" while 79 messages were dropped, and nobody heard)."""
    count = len(message_ids)
    noun = "message" if count == 1 else "messages"
    shown = ", ".join(message_ids[:5]) + (", …" if count > 5 else "")
    return (
        f"nexus: the queue cap of {agent_id} dropped {count} older {noun} to make room for this one ({shown}); "
        f"`nexus queue list {agent_id} --all` shows them"
    )
