"""What routing costs when unused (no numpy, no wordllama), and indexing on the worker thread, not the loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from nexus.ledger import Ledger
from nexus.routing import Router

from ._ledgers import corpus, turn

SRC = Path(__file__).resolve().parents[2] / "src"
HEAVY = "('numpy', 'wordllama', 'tokenizers', 'safetensors')"


def test_import_nexus_help_and_run_do_not_load_numpy_or_wordllama(tmp_path: Path) -> None:
    check = (
        "import sys\n"
        "from nexus.cli import main\n"
        "import nexus, nexus.routing, nexus.broker, nexus.broker.smart, nexus.broker.host\n"
        "code = main(['--help'])\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY})\n"
        "assert code == 0 and not loaded, loaded\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "NEXUS_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_a_written_turn_is_indexed_by_the_worker_thread(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "agents.db") as ledger, Router(ledger) as router:
        corpus(ledger, tmp_path / "ws")
        threads: list[str] = []
        catch_up = router.indexer.catch_up

        def watched(limit: int | None = None) -> int:
            threads.append(threading.current_thread().name)
            return catch_up(limit)

        router.indexer.catch_up = watched  # type: ignore[method-assign]
        router.start()
        added = turn(ledger, "events", "The kafka consumer lags on clicks", "batch polling")
        router.notify()  # what the broker does after a turn: cheap, from the loop
        deadline = time.monotonic() + 30
        while added not in {r.turn_id for r in router.store.rows(list(range(1, 10)))}:
            assert time.monotonic() < deadline, "the worker never indexed the new turn"
            await asyncio.sleep(0.05)
    assert threads and set(threads) == {"nexus-routing-index"}
