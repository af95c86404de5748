"""``nexus serve`` processes for the fault bench (``bench/fault_postgres.py --serve``), and the model they call.

The scripted brokers of the default mode run no engine: no model call, no tool. Here each process is a
real ``nexus serve`` (its own ``NEXUS_HOME``, the ledger at ``NEXUS_DATABASE_URL``) whose agents call the
loopback fake provider of ``nexus.testing`` over HTTP; every turn is a tool call (``ls``), its result, then
a reply: two model calls and one tool run per turn, the turn written by the engine as in production.
:class:`ServeProcess` offers what the bench's chaos uses of a ``BrokerProcess`` (kill, stop, its stderr);
it writes no run events, so the check is the ledger's alone (``nexus.testing.faults.check_ledger``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from nexus.llm import Context, ToolResultMessage
from nexus.testing import FakeProviderServer
from nexus.testing.faults import BrokerProcess
from nexus.testing.steps import Step, from_context, last_user_text, text, tool_call

SRC = Path(__file__).resolve().parents[1] / "src"


def _tool_then_reply(context: Context) -> Step:
    """A tool call on a fresh message; the reply once the tool's result is the newest message."""
    if context.messages and isinstance(context.messages[-1], ToolResultMessage):
        return text(f"done: {last_user_text(context)[:40]}")
    return tool_call("ls", {"path": "."})


def fake_model() -> FakeProviderServer:
    """The model every process calls (started; stop it after): a tool call, then a reply, for each turn."""
    return FakeProviderServer(default=from_context(_tool_then_reply)).start()


class ServeProcess(BrokerProcess):
    """One ``nexus serve`` on the shared database; waits until it listens (see the module docstring). Killed and
    stopped as a :class:`~nexus.testing.faults.BrokerProcess` is."""

    def __init__(  # the broker process's start is replaced, not extended: no super().__init__
        self, url: str, ttl_ms: int, provider: FakeProviderServer, logs: Path, env: dict[str, str]
    ) -> None:
        self.home = logs / f"serve-{time.monotonic_ns()}"
        self.home.mkdir(parents=True)
        (self.home / "nexus.toml").write_text(
            f'default_model = "fake/fake-model"\n\n[broker]\nlease_ttl_ms = {ttl_ms}\n\n'
            f'[providers.fake]\napi = "openai-completions"\nbase_url = "{provider.openai_base_url}"\napi_key = "x"\n',
            encoding="utf-8",
        )
        self.err_path = self.out_path = self.home / "serve.err"
        self.killed_at: float | None = None
        environment = {**os.environ, "NEXUS_HOME": str(self.home), "NEXUS_DATABASE_URL": url,
                       "PYTHONPATH": str(SRC), **env}  # fmt: skip
        with self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nexus.cli", "serve", "--port", "0"], env=environment,
                stdout=subprocess.DEVNULL, stderr=err, cwd=self.home,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while "listening on" not in self.err_path.read_text():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.err_path.read_text()
            time.sleep(0.05)

    def events(self) -> list[dict[str, Any]]:
        """None: ``nexus serve`` prints no run events."""
        return []
