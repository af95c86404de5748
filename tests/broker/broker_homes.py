"""A ``NEXUS_HOME`` whose default model is a loopback fake provider, and ``nexus queue drain`` run on it.

For the tests that drain real processes (crashes, two brokers, a batch that kills its process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nexus.testing import FakeProviderServer

SRC = Path(__file__).resolve().parents[2] / "src"


def write_home(home: Path, server: FakeProviderServer, broker: str = "") -> Path:
    """``home`` with a nexus.toml: the fake model as default, ``broker`` as the ``[broker]`` table's lines."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        f'default_model = "fake/fake-model"\n\n[broker]\n{broker}\n\n'
        f'[providers.fake]\napi = "openai-completions"\nbase_url = "{server.openai_base_url}"\napi_key = "test"\n',
        encoding="utf-8",
    )
    return home


def start_drain(home: Path, *, stdout: int | None = subprocess.PIPE) -> subprocess.Popen[str]:
    """``nexus queue drain`` on ``home`` as a child process (stderr piped, text)."""
    env = {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "queue", "drain"], env=env, stdout=stdout, stderr=subprocess.PIPE, text=True
    )
