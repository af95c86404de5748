"""A real ``nexus serve`` process over a fake provider, for tests that drive it from outside (a browser, curl)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nexus.testing import FakeProviderServer

SRC = Path(__file__).resolve().parents[2] / "src"


def serve_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), **extra}


def write_config(home: Path, provider: FakeProviderServer, server: str = "", *, broker: str = "") -> None:
    """``nexus.toml``: the fake provider as the default model, ``server`` and ``broker`` as the bodies of the
    ``[server]`` and ``[broker]`` tables (the latter written only when given: a caller may open it in ``server``)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n\n'
        f"[server]\n{server}\n\n"
        + (f"[broker]\n{broker}\n\n" if broker else "")
        + '[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{provider.openai_base_url}"\napi_key = "test"\n',
        encoding="utf-8",
    )


def nexus(
    home: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess on this checkout's sources, ``env`` on top of ours."""
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], env=serve_env(home, **(env or {})), capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip


@contextmanager
def serving(
    home: Path, *args: str, env: dict[str, str] | None = None, announced: Path | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``nexus serve --port 0``; yields the process and its URL once ``server.json`` (``announced``: where a
    server of a PostgreSQL ledger announces itself) names its port; killed after."""
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "serve", "--port", "0", *args],
        env=serve_env(home, **(env or {})), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        announced = announced or home / "server.json"
        deadline = time.monotonic() + 120  # 30 s ran out for a server on PostgreSQL at load 15
        while not announced.exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "nexus serve did not announce itself"
            time.sleep(0.05)
        yield process, f"http://127.0.0.1:{json.loads(announced.read_text())['port']}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
