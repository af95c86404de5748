"""The durability promise under real crashes: SIGKILL a draining broker at random moments, restart it.

1,000 messages over 50 agents (followup, steer, collect and interrupt) are accepted — a third of
them in per-sender sessions of their agent (``dm:test:<n>``), each its own queue and run; then
``nexus queue drain`` is started and SIGKILLed at a random moment, 100 times, and finally
run to the end. Afterwards every accepted message must be accounted for:

- its queue item is ``delivered`` (consumed by exactly one turn, completed or aborted) or
  ``failed`` after its runs were cut ``max_attempts`` times (with that reason);
- no message appears in two completed turns;
- the ledger holds no turn left open.

``NEXUS_CRASH_KILLS`` / ``NEXUS_CRASH_MESSAGES`` scale it down for a quick local run.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from broker_homes import start_drain, write_home

from nexus.broker.sessions import session_label_for
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import AcceptRequest, BrokerStore
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

KILLS = int(os.environ.get("NEXUS_CRASH_KILLS", "100"))
MESSAGES = int(os.environ.get("NEXUS_CRASH_MESSAGES", "1000"))
AGENTS = 50
MODES = ("followup",) * 6 + ("steer", "collect", "collect", "interrupt")
TOKEN = re.compile(r"\bmsg-\d{5}\b")

pytestmark = pytest.mark.slow


def _accept_all(home: Path) -> None:
    rng = random.Random(7)
    with Ledger.open(home / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        for n in range(AGENTS):
            store.save_agent(f"a{n:02d}", role="worker", session_label=f"agent:a{n:02d}", spec={})
        requests = []
        for n in range(MESSAGES):
            agent = f"a{n % AGENTS:02d}"
            content = f"msg-{n:05d}: please handle task {n}"
            body: dict[str, object] = {"id": f"m{n}", "from": "user", "to": agent, "content": content}
            key = _session_key(n)
            if key is not None:
                body["session"] = key
            label = session_label_for(agent, f"agent:{agent}", key)
            mode = rng.choice(MODES)
            requests.append(AcceptRequest(agent, label, f"m{n}", "user", body, mode, session_key=key))
        store.accept_many(requests)


def _session_key(n: int) -> str | None:
    """A third of the messages come from one of 3 chat senders of their agent."""
    return f"dm:test:{n % 7 % 3}" if n % 3 == 0 else None


def _pending(home: Path) -> int:
    with Ledger.open(home / "agents.db") as ledger:
        return len(BrokerStore(ledger.database).pending())


def test_sigkilled_drains_lose_nothing_and_run_nothing_twice(isolated_env: Path) -> None:
    rng = random.Random(11)
    # each model reply streams for a while, so kills land mid-reply as well as between turns
    with FakeProviderServer(default=echo, chunk_chars=4, chunk_delay=0.01) as server:
        write_home(isolated_env, server, "max_concurrent = 8\ndebounce_ms = 20\ncap = 1000")
        _accept_all(isolated_env)
        kills = 0
        while kills < KILLS and _pending(isolated_env):
            process = start_drain(isolated_env, stdout=subprocess.DEVNULL)
            try:
                process.wait(timeout=rng.uniform(0.2, 2.0))
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
                process.wait()
                kills += 1
            else:
                stderr = process.stderr.read() if process.stderr else ""
                _check_exit(process.returncode, stderr)
        final = start_drain(isolated_env, stdout=subprocess.DEVNULL)
        _, stderr = final.communicate(timeout=600)
        _check_exit(final.returncode, stderr)
    assert kills == KILLS or _pending(isolated_env) == 0
    _check_ledger(isolated_env)


def _check_exit(code: int, stderr: str) -> None:
    """A drain that ends by itself exits 0, or 1 naming the messages it failed after 3 cut runs (only those)."""
    if code == 1:
        last = stderr.splitlines()[-1]
        assert last.startswith("nexus: error: ") and "its run was cut 3 times" in last, stderr
    else:
        assert code == 0, stderr


def _check_ledger(home: Path) -> None:
    with Ledger.open(home / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        items = store.items()
        assert len(items) == MESSAGES
        statuses = Counter(item.status for item in items)
        assert set(statuses) <= {"delivered", "failed"}, statuses
        for item in items:
            if item.status == "failed":
                assert item.attempts >= 3 and "cut 3 times" in (item.error or ""), item
        assert run_inline(ledger.turns.open_turns()) == []
        completed_seen: Counter[str] = Counter()
        turn_tokens: dict[str, set[str]] = {}
        labels = {item.session_label for item in items}
        assert any("~dm~test~" in label for label in labels)
        for label in sorted(labels):
            for turn in run_inline(ledger.turns.path(label)):
                tokens = {
                    token
                    for stored in run_inline(ledger.turns.messages(turn.id))
                    if stored.role == "user"
                    for token in TOKEN.findall(str(stored.message.content))
                }
                turn_tokens[turn.id] = tokens
                if turn.status == "completed":
                    completed_seen.update(tokens)
        twice = [token for token, count in completed_seen.items() if count > 1]
        assert twice == [], f"messages in two completed turns: {twice[:10]}"
        for item in items:
            if item.status != "delivered":
                continue
            token = TOKEN.search(str(item.message.get("content")))
            assert token is not None and item.turn_id in turn_tokens, item
            assert token.group(0) in turn_tokens[item.turn_id], (item, turn_tokens[item.turn_id])
            turn = run_inline(ledger.turns.get(item.turn_id))
            assert turn.status in ("completed", "aborted")
