"""A synthetic ledger of N turns for the speed figures (10,000 and 100,000 checkpoints).

Its texts are the evaluation corpus's requests and replies with words swapped for others of the corpus
and a made-up module name added, so the index sees a realistic spread of term frequencies; sessions hold
20 turns each, every tenth session is a fork. No files exist on disk (freshness then costs one failed
``stat`` per file, as it does for a deleted file).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from build import SESSIONS

from nexus.ledger import NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline

_TURNS_PER_SESSION = 20


def _phrases() -> tuple[list[str], list[str], list[str]]:
    asks, replies, words = [], [], set()
    for sess in SESSIONS:
        for episode in sess.episodes + [e for f in sess.forks for e in f.episodes]:
            for turn in episode.turns:
                asks.append(turn.ask)
                replies.append(turn.reply)
                words.update(w for w in turn.ask.lower().split() if w.isalpha() and len(w) > 3)
    return asks, replies, sorted(words)


def _mutate(text: str, words: list[str], rng: random.Random) -> str:
    out = [rng.choice(words) if rng.random() < 0.3 and w.isalpha() else w for w in text.split()]
    return " ".join(out) + f" in module m{rng.randrange(5000)}"


def build_scale(home: Path, n_turns: int, seed: int = 7) -> float:
    """Write ``n_turns`` turns into ``home/agents.db``; returns the seconds it took."""
    from nexus.ledger import Ledger
    from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage

    rng = random.Random(seed)
    asks, replies, words = _phrases()
    started = time.perf_counter()
    ledger = Ledger.open(home / "agents.db", message_cache=0)
    written, session = 0, 0
    while written < n_turns:
        label = f"scale-{session}"
        if session % 10 == 9 and written:
            parent = run_inline(ledger.sessions.head(f"scale-{session - 1}"))
            run_inline(
                ledger.sessions.create(NewSession(label, origin="fork", head_turn_id=parent.id if parent else ""))
            ) if parent else run_inline(ledger.sessions.create(NewSession(label)))
        else:
            run_inline(ledger.sessions.create(NewSession(label)))
        for i in range(min(_TURNS_PER_SESSION, n_turns - written)):
            path = f"pkg{rng.randrange(300)}/mod{rng.randrange(5000)}.py"
            call = ToolCall(f"c{written}", "edit", {"path": path, "oldText": "a", "newText": "b"})
            run_inline(
                ledger.turns.write(
                    TurnWrite(
                        label,
                        None,
                        query_messages=[UserMessage(_mutate(rng.choice(asks), words, rng))],
                        response_messages=[
                            AssistantMessage([call], stop_reason="tool_use"),
                            ToolResultMessage(call.id, "edit", [TextContent("ok")]),
                            AssistantMessage([TextContent(_mutate(rng.choice(replies), words, rng))]),
                        ],
                        details=TurnDetails(workspace_path=str(home / "ws")),
                    )
                )
            )
            written += 1
            del i
        session += 1
    ledger.close()
    return time.perf_counter() - started
