"""``scripts/quickstart.sh`` says what it is doing while llama-cpp-python compiles (it was silent for minutes
behind ``pip --quiet``), and shows the end of the build log when the install fails.

The script runs for real, in a copy of the repository whose ``.venv/bin/python`` is a stand-in: its
``pip install`` prints ninja's ``[n/N]`` steps slowly, as the real build does under ``pip -v``.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
# a stand-in venv python: llama_cpp missing until pip ran, pip builds in three slow steps
case "$*" in
  *"import llama_cpp"*) [ -f "$(dirname "$0")/built" ] && exit 0 || exit 1 ;;
  *"-m pip install"*"-e"*)
    for step in 1 2 3; do echo "[$step/3] Building CXX object ggml-$step.o"; sleep 1.2; done
    [ -n "${FAIL_BUILD:-}" ] && { echo "error: ninja build stopped: compiler crashed"; exit 1; }
    touch "$(dirname "$0")/built"; exit 0 ;;
  *) exit 0 ;;
esac
"""


def _fake_checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "quickstart.sh", checkout / "scripts" / "quickstart.sh")
    bin_dir = checkout / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "nexus").write_text('#!/usr/bin/env bash\necho "reply to: $*"\n')
    for name in ("python", "nexus"):
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    return checkout


def _quickstart(checkout: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(checkout / "scripts" / "quickstart.sh"), "hi"],
        env={**os.environ, "QUICKSTART_PROGRESS_S": "1", **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="the script needs a compiler")
def test_the_build_reports_its_progress_then_the_reply_follows(tmp_path: Path) -> None:
    done = _quickstart(_fake_checkout(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "745 CPU-seconds" in done.stderr, "an honest estimate, not 'about 4 minutes'"
    progress = [line for line in done.stderr.splitlines() if "s so far" in line]
    assert progress and any("build step [" in line for line in progress), done.stderr
    assert "building llama-cpp-python: done in" in done.stderr
    assert done.stdout.strip() == "reply to: run hi"


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="the script needs a compiler")
def test_a_failed_build_shows_the_end_of_its_log(tmp_path: Path) -> None:
    failed = _quickstart(_fake_checkout(tmp_path), FAIL_BUILD="1")
    assert failed.returncode == 1
    assert "building llama-cpp-python failed" in failed.stderr and "compiler crashed" in failed.stderr
    assert "reply to" not in failed.stdout
