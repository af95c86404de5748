"""``tune_gc_for_many_runs``: what a host of many concurrent runs calls once after startup.

Run in a child process: the collector's settings are process-wide and must not leak into the
test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = """
import gc, json
from nexus.engine.wiring.gc_tuning import MANY_RUNS_THRESHOLDS, tune_gc_for_many_runs
before = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
tune_gc_for_many_runs()
after = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(), "expected": MANY_RUNS_THRESHOLDS}
garbage = []
garbage.append(garbage)  # a reference cycle made after the freeze is still collected
del garbage
after["collected"] = gc.collect()
print(json.dumps({"before": before, "after": after}))
"""


def test_tuning_freezes_the_startup_heap_and_raises_the_thresholds() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    report = json.loads(done.stdout)
    assert report["before"]["frozen"] == 0
    assert report["after"]["frozen"] > 1000  # the imported modules and their objects
    assert report["after"]["threshold"] == report["after"]["expected"]
    assert report["after"]["threshold"][0] > report["before"]["threshold"][0]
    assert report["after"]["collected"] >= 1
