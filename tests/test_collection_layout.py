"""Any subset of the test directories collects, in any order.

Test directories without ``__init__.py`` put themselves on ``sys.path`` and share one module
namespace: a test that imports ``conftest`` (or a helper whose name another directory also
uses) gets whichever one pytest loaded last. Pytest loads the given directories' conftests in
argument order, so ``pytest tests/cli tests/engine`` broke ``tests/cli`` while the reverse order
worked. These collect every directory in both orders in a fresh pytest process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DIRS = sorted(str(p.relative_to(ROOT)) for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))


@pytest.mark.parametrize("order", ["sorted", "reversed"])
def test_every_directory_collects_whatever_the_order(order: str) -> None:
    dirs = DIRS if order == "sorted" else DIRS[::-1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *dirs],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
    assert "error" not in done.stdout.splitlines()[-1], done.stdout[-3000:]
    assert "tests/cli/test_send_cli.py::" in done.stdout and "tests/engine/test_execute.py::" in done.stdout


def test_the_directories_include_cli_and_engine() -> None:
    assert {"tests/cli", "tests/engine"} <= set(DIRS)
