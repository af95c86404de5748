"""The ledger benchmark's data: peer-sized turns, whole sessions (plain, forked, compacted), file sizes.

Split from ``bench_ledger.py`` so that script holds the timing and the report; every session here is
written through the public ledger API, the way the engine writes them.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import statistics
from pathlib import Path

from nexus.ledger import CompactionRecord, Ledger, NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

WORDS = (
    "the", "ledger", "keeps", "every", "turn", "message", "tool", "call",
    "and", "compaction", "of", "an", "agent", "run", "in", "sqlite",
)  # fmt: skip
RNG = random.Random(1)


def text(size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = RNG.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def peer_turn(i: int) -> tuple[list[Message], list[Message]]:
    """The peer benchmark's 4 messages: user ~90 B, a `read` call, a 230 B result, a 230 B reply."""
    call = AssistantMessage(
        [ToolCall(f"call_{i}", "read", {"path": f"src/module_{i % 50}.py"})],
        api="openai-completions",
        provider="openai",
        model="gpt-4o",
        stop_reason="tool_use",
        usage=Usage(1200, 20, total=1220),
    )
    result = ToolResultMessage(f"call_{i}", "read", [TextContent(text(230))])
    final = AssistantMessage(
        [TextContent(text(230))],
        api="openai-completions",
        provider="openai",
        model="gpt-4o",
        usage=Usage(1450, 60, total=1510),
    )
    return [UserMessage(text(90))], [call, result, final]


def two_call_turn(i: int) -> tuple[list[Message], list[Message]]:
    """4 messages + 2 tool calls: user, an assistant with two calls, two results."""
    calls = AssistantMessage(
        [ToolCall(f"a{i}", "read", {"path": "a.py"}), ToolCall(f"b{i}", "grep", {"pattern": "def "})],
        api="openai-completions",
        provider="openai",
        model="gpt-4o",
        stop_reason="tool_use",
        usage=Usage(1000, 30, total=1030),
    )
    results: list[Message] = [
        ToolResultMessage(f"a{i}", "read", [TextContent(text(230))]),
        ToolResultMessage(f"b{i}", "grep", [TextContent(text(230))]),
    ]
    return [UserMessage(text(90))], [calls, *results]


def fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def median(values: list[float]) -> float:
    return statistics.median(values)


# --------------------------------------------------------------------------- write throughput


def write_turn(ledger: Ledger, query: list[Message], response: list[Message]) -> str:
    """One turn on session ``s`` at its head, as the engine writes it (model and provider in its details)."""
    details = TurnDetails(model="gpt-4o", provider="openai")
    return run_inline(
        ledger.turns.write(TurnWrite("s", None, query_messages=query, response_messages=response, details=details))
    )


def build(db: Path, depth: int, fork_every: int = 0) -> str:
    """A session of ``depth`` turns (peer content). With ``fork_every``, the path crosses a fork that often."""
    fresh(db)
    ledger = Ledger.open(db)
    run_inline(ledger.sessions.create(NewSession("s")))
    head = None
    for i in range(depth):
        if fork_every and i and i % fork_every == 0 and head is not None:
            # leave a side turn behind, so the next turn on the path has to open a new segment
            run_inline(
                ledger.turns.write(
                    TurnWrite(
                        "s",
                        None,
                        query_messages=[UserMessage("side")],
                        response_messages=[],
                        parent_turn_id=run_inline(ledger.turns.get(head)).parent_turn_id,
                        if_head_moved="branch",
                    )
                )
            )
        head = write_turn(ledger, *peer_turn(i))
    ledger.close()
    return head or ""


def db_bytes(db: Path) -> int:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(db)


def json_ancestry_bytes(tmp: Path, depth: int) -> int:
    """The spec's threads table with the ancestry stored as a JSON array per turn (the O(N^2) design)."""
    db = tmp / "ancestry.db"
    fresh(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE threads (turn_id TEXT PRIMARY KEY, ancestry TEXT NOT NULL, depth INTEGER)")
    ancestry: list[str] = []
    conn.execute("BEGIN")
    for i in range(depth):
        ancestry.append(f"01J{i:023d}")
        conn.execute("INSERT INTO threads VALUES (?, ?, ?)", (ancestry[-1], json.dumps(ancestry), i))
    conn.execute("COMMIT")
    conn.close()
    size = db_bytes(db)
    fresh(db)
    return size


COMPACT_EVERY, COMPACT_KEEP, COMPACT_AT = 500, 100, 250
"""The compacted session: a compaction turn every 500 turns (~100k tokens of this content, a 128k window
filling up), keeping the newest 100 turns (~20k tokens, the engine's ``keep_recent_tokens``); the first one
at turn 250, so at 1,000 and 10,000 turns the last compaction is 250 turns back (mid-way, not just done)."""


def build_compacted(db: Path, depth: int) -> None:
    """A session of ``depth`` turns of peer content compacted the way the engine does it (see COMPACT_EVERY)."""
    fresh(db)
    ledger = Ledger.open(db, message_cache=0)
    run_inline(ledger.sessions.create(NewSession("s")))
    ids: list[str] = []
    for i in range(depth):
        q, r = peer_turn(i)
        ids.append(
            run_inline(
                ledger.turns.write(
                    TurnWrite("s", None, query_messages=q, response_messages=r, details=TurnDetails(model="gpt-4o"))
                )
            )
        )
        if i % COMPACT_EVERY == COMPACT_AT and i >= COMPACT_KEEP:
            record = CompactionRecord(text(4_000), ids[-1], ids[-COMPACT_KEEP], i, "gpt-4o-mini")
            ids.append(run_inline(ledger.turns.write(TurnWrite("s", None, compaction=record))))
    ledger.close()
