"""The path of one inbound chat message stays short: ``bench/walk_message.py`` on the real broker and adapter.

The script sends one message through ``nexus adapters monitor``'s host (a real subprocess adapter, the
broker, the engine on a scripted model, the reply streamed back to the adapter's ``stream`` process) and
records it with ``sys.setprofile``. The message must come back into a package it had left at most 8 times
(11 before the run handle; docs/architecture.md names each step), and a token must pass at most 4
wrappers between the engine's event channel and the adapter's pipe (10 before).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_one_inbound_message_reenters_few_packages_and_a_token_passes_few_wrappers() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "walk_message.py"), "--list"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    reentries = re.search(r"re-entries of a package the message had left: (\d+)", done.stdout)
    wrappers = re.search(r"wrappers a token passes between .*: (\d+)", done.stdout)
    assert reentries is not None and wrappers is not None, done.stdout
    assert int(reentries.group(1)) <= 8, done.stdout
    assert 1 <= int(wrappers.group(1)) <= 4, done.stdout  # at least the subscription: the token was followed
    assert "re-enters broker     nexus.broker.execution" not in done.stdout  # nobody matches runs any more
