"""A program that compacts a session ends cleanly: the provider's stream is closed when its call ends.

trial15 D13: ``asyncio.run`` of a program that called ``compact_session`` ended with "unhandled exception
during asyncio.run() shutdown … RuntimeError: async generator ignored GeneratorExit". The failover wrapped
the provider's stream in a relaying generator and closed only that one, so the provider's stream was left
to the garbage collector; collected during ``rt.aclose()``, its close ran as a task that ``asyncio.run``
cancelled, and the stream answered the cancel with an error event instead of closing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

_SRC = Path(__file__).resolve().parents[2] / "src"

_PROGRAM = """
import asyncio
from nexus.engine import AgentSpec, Runtime
from nexus.engine.wiring.compact_session import compact_session

async def main():
    rt = await Runtime.open()
    for i in range(3):
        await rt.run(AgentSpec(), "cmp3", f"short {i}")
    out = await compact_session("cmp3", runtime=rt)
    print("compaction", out.status)
    await rt.aclose()

asyncio.run(main())
"""


def test_a_program_that_compacts_a_session_ends_without_an_async_generator_error(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        isolated_env.mkdir(parents=True, exist_ok=True)
        (isolated_env / "nexus.toml").write_text(
            f'default_model = "fake/fake-model"\n\n[providers.fake]\napi = "openai-completions"\n'
            f'base_url = "{provider.openai_base_url}"\napi_key = "test"\n',
            encoding="utf-8",
        )
        env = {**os.environ, "PYTHONPATH": str(_SRC), "NEXUS_HOME": str(isolated_env)}
        done = subprocess.run(
            [sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert done.returncode == 0 and done.stdout.startswith("compaction "), done.stderr
    assert "GeneratorExit" not in done.stderr and "Traceback" not in done.stderr, done.stderr
