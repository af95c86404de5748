"""A manager agent delegates to two workers and answers the user (the seed-003 manager-worker flow).

Run it with a real model (it uses the model a `nexus run` would: a key in the environment or
`default_model` in nexus.toml):

    export ANTHROPIC_API_KEY=sk-ant-...          # or OPENAI_API_KEY=...
    .venv/bin/python examples/manager_worker.py "Should we write our CLI in Rust or Go?"

Everything is recorded in $NEXUS_HOME/agents.db: the three agents, their sessions
(agent:lead, agent:researcher, agent:critic), every turn, and who messaged whom
(`nexus sessions history agent:lead`, `nexus queue list --all`). The tests run this same
code with the scripted model (tests/broker/test_manager_worker_example.py).
"""

from __future__ import annotations

import asyncio
import sys

from nexus.broker import AgentIdentity, AgentMessage, new_message_id, running_broker
from nexus.config import NexusConfig, load_config
from nexus.engine import AgentSpec
from nexus.ledger import Ledger
from nexus.llm import StreamFn

LEAD_PROMPT = (
    "You lead two workers. For every question: ask `researcher` for the facts and `critic` for the "
    "risks, using send_message_to_agent with waitForReply=true (you may ask both at once), then "
    "answer the user in a short paragraph that names what each worker contributed."
)
WORKERS = {
    "researcher": "You find the relevant facts for the question you are given. Answer in three bullet points.",
    "critic": "You point out the two biggest risks or counter-arguments. Answer in two bullet points.",
}


async def ask(question: str, *, config: NexusConfig | None = None, stream_fn: StreamFn | None = None,
              model: str | None = None) -> str:  # fmt: skip
    """Register the three agents (idempotent), send ``question`` to the lead, return its answer."""
    config = config or load_config()
    with Ledger.open(config.database_path) as ledger:
        async with running_broker(config, ledger, stream_fn=stream_fn) as host:
            broker = host.broker
            broker.register_agent(
                AgentIdentity("lead", "agent:lead", "manager"),
                spec=AgentSpec(model=model, system_prompt=LEAD_PROMPT, tools=("send_message_to_agent", "list_agents")),
            )
            for agent_id, prompt in WORKERS.items():
                broker.register_agent(
                    AgentIdentity(agent_id, f"agent:{agent_id}", "worker"),
                    spec=AgentSpec(model=model, system_prompt=prompt, tools=()),
                )
            result = await broker.send_and_wait(AgentMessage(new_message_id(), "user", "lead", question))
    if not result.success:
        raise SystemExit(f"the lead agent failed: {result.error}")
    return result.reply or ""


if __name__ == "__main__":
    question = " ".join(sys.argv[1:]) or "Should a small team write its CLI in Rust or in Go?"
    print(asyncio.run(ask(question)))
