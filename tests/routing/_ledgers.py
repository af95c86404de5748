"""Small real ledgers for the routing tests: turns with real messages and tool calls, files on disk."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nexus.ledger import Ledger, NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

DAY_MS = 86_400_000
NOW_MS = 1_790_000_000_000


def turn(
    ledger: Ledger,
    label: str,
    ask: str,
    reply: str,
    *,
    writes: tuple[str, ...] = (),
    workspace: Path | None = None,
    status: str = "completed",
    at_ms: int = NOW_MS - DAY_MS,
    parent: str | None = None,
) -> str:
    """Write one turn to ``label`` (created if new): the request, an ``edit``/``write`` per file (made on disk
    under ``workspace``), and the reply; returns its id."""
    try:
        run_inline(ledger.sessions.get(label))
    except LookupError:
        run_inline(ledger.sessions.create(NewSession(label)))
    response: list[object] = []
    if writes:
        calls = [ToolCall(f"c{i}-{at_ms}", "write", {"path": p, "content": ask}) for i, p in enumerate(writes)]
        response.append(AssistantMessage([TextContent("Editing."), *calls], stop_reason="tool_use", timestamp=at_ms))
        for call, path in zip(calls, writes, strict=True):
            if workspace is not None:
                target = workspace / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(f"{ask}\n", encoding="utf-8")
            response.append(ToolResultMessage(call.id, "write", [TextContent("ok")], timestamp=at_ms))
    stop = "stop" if status == "completed" else "error"
    usage = Usage(input=100, output=20, total=120)
    response.append(AssistantMessage([TextContent(reply)], stop_reason=stop, usage=usage, timestamp=at_ms))
    details = TurnDetails(started_at=at_ms, workspace_path=str(workspace) if workspace else None)
    turn = TurnWrite(
        label, None, query_messages=[UserMessage(ask, timestamp=at_ms)], response_messages=response,  # type: ignore[arg-type]
        status=status, completed_at=at_ms + 1000, details=details,
    )  # fmt: skip
    if parent is not None:
        turn = dataclasses.replace(turn, parent_turn_id=parent)
    return run_inline(ledger.turns.write(turn))


def corpus(ledger: Ledger, workspace: Path) -> dict[str, str]:
    """Three pieces of work on distinct topics, one with two turns; returns the turn ids by name."""
    ids = {}
    ids["limiter"] = turn(ledger, "auth", "Add rate limiting to the login endpoint, 5 attempts per minute",
                          "Added a sliding window limiter in auth/ratelimit.py", writes=("auth/ratelimit.py",),
                          workspace=workspace, at_ms=NOW_MS - 3 * DAY_MS)  # fmt: skip
    ids["limiter-user"] = turn(ledger, "auth", "The rate limiter should key on the username too",
                               "The limiter window key is now ip and username", writes=("auth/ratelimit.py",),
                               workspace=workspace, at_ms=NOW_MS - 3 * DAY_MS + 60_000)  # fmt: skip
    ids["docker"] = turn(ledger, "ops", "Shrink the Docker image of the API with a multi-stage build",
                         "Multi-stage Dockerfile, 1.9 GB down to 240 MB", writes=("Dockerfile",), workspace=workspace,
                         at_ms=NOW_MS - 2 * DAY_MS)  # fmt: skip
    ids["invoice"] = turn(ledger, "billing", "Generate a PDF invoice when an order is paid",
                          "billing/invoice_pdf.py renders the invoice with WeasyPrint",
                          writes=("billing/invoice_pdf.py",), workspace=workspace, at_ms=NOW_MS - DAY_MS)  # fmt: skip
    return ids
