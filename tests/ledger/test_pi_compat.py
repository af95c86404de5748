"""pi's own SessionManager (node) opens what we export. Skipped when node or pi is not installed.

Install once with: ``npm install --prefix /tmp/pi-check @mariozechner/pi-coding-agent`` (or set NEXUS_PI_DIR).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_pi_files import FIXTURES

from nexus.ledger import CompactionRecord, Ledger, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.pi_jsonl import TURN_STATUS_TYPE, export_pi_session
from nexus.testing.conformance.support import reply, tool_round, user

PI_DIR = Path(os.environ.get("NEXUS_PI_DIR", "/tmp/pi-check"))
SESSION_MANAGER = PI_DIR / "node_modules/@mariozechner/pi-coding-agent/dist/core/session-manager.js"

SCRIPT = """
import { pathToFileURL } from "node:url";
const [lib, file] = process.argv.slice(2);
const { SessionManager } = await import(pathToFileURL(lib).href);
const sm = SessionManager.open(file);
const ctx = sm.buildSessionContext();
console.log(JSON.stringify({messages: ctx.messages, model: ctx.model ?? null, thinking: ctx.thinkingLevel ?? null}));
"""

_MISSING = shutil.which("node") is None or not SESSION_MANAGER.exists()
if _MISSING and os.environ.get("NEXUS_REQUIRE_PI"):  # CI installs pi: a failed install must fail, not skip
    raise RuntimeError(f"NEXUS_REQUIRE_PI is set but node or pi is missing ({SESSION_MANAGER})")
pytestmark = pytest.mark.skipif(_MISSING, reason="node + @mariozechner/pi-coding-agent needed")


def _pi_context(tmp_path: Path, file: Path) -> dict[str, object]:
    script = tmp_path / "load.mjs"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        ["node", str(script), str(SESSION_MANAGER), str(file)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("name", ["openai-tools-3-turns", "anthropic-thinking-2-turns"])
def test_pi_loads_our_export_of_its_own_files(tmp_path: Path, name: str) -> None:
    source = FIXTURES / f"{name}.jsonl"
    with Ledger.open(tmp_path / "a.db") as ledger:
        run_inline(ledger.pi.import_pi(source, "s"))
        out = export_pi_session(ledger, "s", tmp_path / "out.jsonl")
    assert _pi_context(tmp_path, out) == _pi_context(tmp_path, source)


def test_pi_loads_our_export_of_a_native_session(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        t1 = run_inline(
            ledger.turns.write(
                TurnWrite("s", None, query_messages=[user("q1")], response_messages=[*tool_round("c1"), reply("a1")])
            )
        )
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q2")], response_messages=[reply("a2")]))
        )
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "s", None, compaction=CompactionRecord("summary text", t1, first_kept_turn_id=None, model="m")
                )
            )
        )
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q3")], response_messages=[reply("a3")]))
        )
        out = export_pi_session(ledger, "s", tmp_path / "out.jsonl")
    ctx = _pi_context(tmp_path, out)
    messages = ctx["messages"]
    assert isinstance(messages, list)
    roles = [m["role"] for m in messages]
    assert roles == ["compactionSummary", "user", "assistant"]
    assert messages[0]["summary"] == "summary text"
    assert ctx["model"] == {"provider": "fake", "modelId": "fake-model"}


def test_pi_loads_an_export_with_aborted_and_failed_turns(tmp_path: Path) -> None:
    """The custom entries that keep non-completed statuses do not disturb pi: every message, in order."""
    with Ledger.open(tmp_path / "a.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q1")], response_messages=[reply("a1")]))
        )
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "s",
                    None,
                    query_messages=[user("q2")],
                    response_messages=[reply("half")],
                    status="aborted",
                    stop_reason="aborted",
                    error={"kind": "unknown", "message": "stopped", "retryable": True},
                )
            )
        )
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q3")], status="failed", stop_reason="error"))
        )
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q4")], response_messages=[reply("a4")]))
        )
        out = export_pi_session(ledger, "s", tmp_path / "out.jsonl")
    assert out.read_text().count(TURN_STATUS_TYPE) == 2
    ctx = _pi_context(tmp_path, out)
    messages = ctx["messages"]
    assert isinstance(messages, list)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "user", "assistant"]
    said = [m["content"] if m["role"] == "user" else m["content"][0]["text"] for m in messages]
    assert said == ["q1", "a1", "q2", "half", "q3", "q4", "a4"]
