"""``nexus send --route smart|hybrid``: decide where the message goes before it is sent as usual.

Routing only readdresses the message (a fork of the best checkpoint, a new conversation, or the agent as
given: :func:`nexus.broker.smart.plan_route`); the send that follows is the normal durable one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus.broker import AgentMessage
    from nexus.config import NexusConfig
    from nexus.ledger import Ledger


def route_message(config: NexusConfig, ledger: Ledger, message: AgentMessage, route: str) -> AgentMessage:
    """The message as routed under ``route``; says on stderr where it goes and why."""
    from nexus.broker import BrokerError, SmartRouting, plan_route, session_label_for
    from nexus.errors import UsageError
    from nexus.ledger import BrokerStore
    from nexus.routing import RoutingError

    store = BrokerStore(ledger.database)

    def label_of(agent: str, key: str | None) -> str:
        row = store.get_agent(agent)
        if row is None:
            known = ", ".join(sorted(a.agent_id for a in store.list_agents())) or "none registered"
            raise UsageError(f"unknown agent {agent!r} (known: {known})")
        return session_label_for(agent, row.session_label, key)

    if message.to:
        label_of(message.to, None)  # an unknown agent is refused before anything is decided or stored
    routing = SmartRouting.from_config(config, ledger)
    try:
        plan = plan_route(routing, message, route, label_of)
    except (RoutingError, BrokerError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        routing.close()
    decision = plan.decision
    for note in plan.notes:
        print(f"nexus: routing: {note}", file=sys.stderr)
    if decision is None:
        print(f"nexus: routed explicitly ({plan.arm} arm) to {plan.message.to}", file=sys.stderr)
    elif decision.mode == "existing" and decision.checkpoint is not None:
        c = decision.checkpoint
        print(
            f"nexus: routed to a fork of {c.session_key} at turn {c.position} ({c.turn_id}), agent {plan.message.to}, "
            f"confidence {decision.confidence:.2f}: {c.context}",
            file=sys.stderr,
        )
    else:
        where = "a new conversation" if plan.message.session != message.session else "the agent as addressed"
        print(
            f"nexus: nothing in past work fits (confidence {decision.confidence:.2f}): {where} of {plan.message.to}",
            file=sys.stderr,
        )
    if decision is not None and decision.decision_id:  # the only place a CLI user sees the id to judge it by
        print(f"nexus: decision {decision.decision_id} (nexus route feedback {decision.decision_id} good|bad)",
              file=sys.stderr)  # fmt: skip
    return plan.message
