"""A collect batch with one message whose run kills its process: the batch mates still run (real processes).

The poisoned message makes the model call ``bash`` with ``kill -9 $PPID``: the draining process is
SIGKILLed by its own run, every time that message is in the batch. The whole batch used to be
retried as one, so each crash counted an attempt for every mate and after 3 all of them were
``failed``, never run. Now a batch holding crash-cut messages is bisected at each retry, and a
message at its last attempt runs alone: only the poisoned message uses up its attempts.
"""

from __future__ import annotations

from pathlib import Path

from broker_homes import start_drain, write_home

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import AcceptRequest, BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import from_context, last_user_text, text, tool_call

MESSAGES = [f"task {n}" for n in range(5)]
MESSAGES[3] = "task 3 POISON"


def _reply(context: object) -> object:
    prompt = last_user_text(context)  # type: ignore[arg-type]
    if "POISON" in prompt:
        return tool_call("bash", {"command": "kill -9 $PPID"})  # the run kills its own process
    return text("handled")


def test_the_innocent_mates_of_a_batch_that_kills_its_process_still_run(isolated_env: Path) -> None:
    with FakeProviderServer(default=from_context(_reply)) as server:  # type: ignore[arg-type]
        write_home(isolated_env, server, 'mode = "collect"\ndebounce_ms = 0')
        with Ledger.open(isolated_env / "agents.db") as ledger:
            store = BrokerStore(ledger.database)
            store.save_agent("coder", role="worker", session_label="agent:coder", spec={})
            store.accept_many(
                [
                    AcceptRequest("coder", "agent:coder", f"m{n}", "user", {"content": content}, "collect")
                    for n, content in enumerate(MESSAGES)
                ]
            )
        codes = []
        for _ in range(8):  # each drain is killed by the poisoned run, until the message fails
            drain = start_drain(isolated_env)
            _, stderr = drain.communicate(timeout=120)
            codes.append(drain.returncode)
            if drain.returncode != -9:
                break
    assert codes[-1] == 1 and codes[:-1] == [-9] * (len(codes) - 1), (codes, stderr)
    assert "failed: coder (message m3): its run was cut 3 times" in stderr
    with Ledger.open(isolated_env / "agents.db") as ledger:
        items = {item.message_id: item for item in BrokerStore(ledger.database).items()}
        assert items["m3"].status == "failed" and items["m3"].attempts == 3
        for n in (0, 1, 2, 4):
            item = items[f"m{n}"]
            assert item.status == "delivered" and item.attempts <= 3, item
            turn = run_inline(ledger.turns.get(item.turn_id or ""))
            assert turn.status == "completed"
            prompt = str(run_inline(ledger.turns.messages(turn.id))[0].message.content)
            assert MESSAGES[n] in prompt and "POISON" not in prompt
