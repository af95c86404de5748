"""``fork_session`` refuses a label no door could address: the one fork rule, for MCP and the Python API too.

The CLI and HTTP checked ``label_problem`` before forking; MCP's ``fork_session`` tool and a program calling
``nexus.ledger.fork_session`` did not, and created ``a/b``, ``"nl\\nx"``, ESC-coloured and 300-character labels
(a newline then forged a row of ``nexus sessions list``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession, SessionLabelError, TurnWrite, fork_session
from nexus.llm import AssistantMessage, TextContent, UserMessage


async def test_a_fork_label_no_door_could_address_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger:
        await ledger.sessions.create(NewSession("main"))
        reply = AssistantMessage(content=[TextContent("hi")], provider="p", model="m")
        turn_id = await ledger.turns.write(TurnWrite("main", None, query_messages=[UserMessage("q")],
                                                  response_messages=[reply]))  # fmt: skip
        for label, said in (("a/b", "'/'"), ("back\\slash", "'/'"), (" edge", "spaces"), ("nl\nx", "control"),
                            ("x\x1b[31m", "control"), ("l" * 300, "at most")):  # fmt: skip
            with pytest.raises(SessionLabelError, match=said):
                await fork_session(ledger, turn_id, label=label)
        assert [s.label for s in await ledger.sessions.list()] == ["main"]
        fine = await fork_session(ledger, turn_id, label="main-b")
        assert fine.label == "main-b" and fine.thread_id == turn_id
