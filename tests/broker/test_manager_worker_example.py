"""examples/manager_worker.py runs end to end with the scripted model: delegation, replies, the log."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from nexus.config import load_config
from nexus.ledger import Ledger
from nexus.testing import ScriptedModel
from nexus.testing.steps import Reply, from_context, last_user_text, reply, text, tool_call

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "manager_worker.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("manager_worker", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ask_worker(agent: str, content: str, call_id: str) -> Reply:
    return tool_call("send_message_to_agent", {"to": agent, "content": content, "waitForReply": True}, id=call_id)


async def test_the_manager_delegates_to_both_workers_and_answers(isolated_env: Path) -> None:
    worker = from_context(lambda context: text(f"worker notes on: {last_user_text(context).splitlines()[-1]}"))
    scripted = ScriptedModel(
        [
            reply(ask_worker("researcher", "facts: Rust vs Go", "c1"), ask_worker("critic", "risks: Rust vs Go", "c2")),
            worker,  # the two workers run at once: whichever asks first gets this one
            worker,
            text("Go: the researcher found the facts and the critic named the risks."),
        ]
    )
    example = load_example()
    answer = await example.ask("Rust or Go?", config=load_config(), stream_fn=scripted.stream,
                               model=scripted.model.ref)  # fmt: skip
    assert answer == "Go: the researcher found the facts and the critic named the risks."
    scripted.assert_complete()
    with Ledger.open(isolated_env / "agents.db") as ledger:
        for agent_id in ("researcher", "critic"):
            (turn,) = await ledger.turns.path(f"agent:{agent_id}")
            assert turn.status == "completed"
        log = ledger.database.connection.execute("SELECT from_agent, to_agent FROM broker_messages ORDER BY to_agent")
        assert log.fetchall() == [("lead", "critic"), ("lead", "researcher")]
        results = [
            m.message
            for m in await ledger.turns.messages((await ledger.turns.path("agent:lead"))[0].id)
            if m.role == "tool_result"
        ]
        assert sorted(str(r.content[0].text) for r in results) == [  # type: ignore[union-attr]
            "worker notes on: facts: Rust vs Go",
            "worker notes on: risks: Rust vs Go",
        ]
