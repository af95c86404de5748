"""An adapter's credential in the errors the adapter itself reports reaches no output (issue 20, item 2).

Real processes: the CLI, and ``scripts/leaky.py``, an adapter that quotes its own token in its
``send`` failure, its stream's ``delivery_error``, its ``health`` report and the stderr of a
crash. The token must appear in no CLI output and in no byte of the ledger, while the errors
keep saying what failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from adapter_helpers import SCRIPTS

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

pytestmark = pytest.mark.slow  # real processes: a few seconds

SECRET = "leakyplaincredential-0123456789"
"""No vendor shape: only the value itself can find it."""


def run_nexus(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_adapter_quoting_its_own_credential_in_its_errors_is_redacted_everywhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    command = f"{sys.executable} {SCRIPTS / 'leaky.py'}"
    with FakeProviderServer(default=echo) as provider:
        (home / "nexus.toml").write_text(
            'default_model = "fake/m"\n\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{provider.openai_base_url}"\napi_key = "test"\n\n'
            f'[adapters.leaky]\ncommand = "{command}"\nmode = "native"\n\n'
            '[adapters.leaky.accounts.a]\ncredential = "${LEAKY_TOKEN}"\n\n'
            f'[adapters.blocks]\ncommand = "{command}"\nmode = "blocks"\n\n'
            '[adapters.blocks.accounts.a]\ncredential = "${LEAKY_TOKEN}"\n\n'
            '[adapters.broken]\ncommand = "' + command + '"\n\n'
            '[adapters.broken.accounts.a]\ncredential = "${LEAKY_TOKEN}"\nconfig = { crash = true }\n',
            encoding="utf-8",
        )
        env = {"NEXUS_HOME": str(home), "LEAKY_TOKEN": SECRET}
        assert run_nexus("agents", "add", "coder", env=env).returncode == 0
        outputs = [
            run_nexus("adapters", "test", "leaky/a", "--to", "u", "hello", env=env),
            run_nexus("adapters", "test", "blocks/a", "--to", "u", "hello", env=env),
            run_nexus("adapters", "test", "broken/a", "--to", "u", "hello", env=env),
            run_nexus("adapters", "health", "--json", env=env),
            run_nexus("send", "coder", "hi", "--deliver", "leaky/a:u", "--wait", "--timeout", "60", env=env),
            run_nexus("send", "coder", "hi", "--deliver", "blocks/a:u", "--wait", "--timeout", "60", env=env),
            run_nexus("sessions", "history", "agent:coder", env=env),
        ]
    said = "\n".join(out.stdout + out.stderr for out in outputs)
    for reason in ("edit failed", "send failed", "down", "crashed"):
        assert reason in said, reason  # the errors still say what went wrong
    assert SECRET not in said, said
    stored = b"".join(path.read_bytes() for path in home.glob("agents.db*"))
    assert b"edit failed" in stored and b"send failed" in stored
    assert SECRET.encode() not in stored


async def _until(check: Callable[[], bool]) -> None:
    import asyncio

    deadline = asyncio.get_running_loop().time() + 30
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def test_a_credential_split_across_two_pieces_of_an_adapters_stderr_is_cut_too() -> None:
    """The pass-through reads what the pipe has: a secret may end one read and start the next."""
    import asyncio
    import io

    from nexus.adapters._stderr import forward_stderr
    from nexus.llm.redact import add_secrets
    from nexus.testing import InstantClock

    add_secrets([SECRET])
    stream, out = asyncio.StreamReader(), io.StringIO()
    forwarding = asyncio.create_task(forward_stderr(stream, "adapter x/a stream", InstantClock(), out))
    stream.feed_data(f"using token {SECRET[:9]}".encode())
    await _until(lambda: "using token" in out.getvalue())  # the piece before the secret's start goes on at once
    stream.feed_data(f"{SECRET[9:]} for x\nthen a word that starts like it: {SECRET[:5]}".encode())
    await _until(lambda: out.getvalue().endswith(SECRET[:5]))  # a start no rest follows goes on after a moment
    stream.feed_eof()
    await forwarding
    assert out.getvalue() == f"using token [redacted] for x\nthen a word that starts like it: {SECRET[:5]}"
