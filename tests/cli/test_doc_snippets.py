"""The Python snippets of README.md and docs/engine.md run as a new user would paste them.

Against the loopback fake provider, in a real subprocess, so a
renamed attribute in the docs (``result.messages[-1].content``) fails here, not for the reader.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

from .cli_process import SRC
from .fake_config import write_fake_config

ROOT = Path(__file__).resolve().parents[2]


def _python_block(doc: str, needle: str) -> str:
    """The first ```python block of ``doc`` that contains ``needle``."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(encoding="utf-8"), re.S)
    return next(block for block in blocks if needle in block)


def _run(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_readme_run_agent_snippet_prints_the_reply(isolated_env: Path, server: FakeProviderServer) -> None:
    write_fake_config(isolated_env, server)
    server.script(text("README.md and notes.md"))
    result = _run(_python_block("README.md", "run_agent("), isolated_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "end_turn README.md and notes.md\n"


def test_engine_md_run_agent_snippet_prints_reply_and_tokens(isolated_env: Path, server: FakeProviderServer) -> None:
    write_fake_config(isolated_env, server)
    server.script(text("three files"))
    block = _python_block("docs/engine.md", "run_agent(")
    first_call = "\n".join(block.splitlines()[:4])  # the import and the first call; the second needs a key
    code = "import asyncio\nasync def main():\n" + textwrap.indent(first_call, "    ") + "\nasyncio.run(main())\n"
    result = _run(code, isolated_env)
    assert result.returncode == 0, result.stderr
    reply, stop_reason, tokens = result.stdout.rsplit(maxsplit=2)
    assert (reply, stop_reason) == ("three files", "end_turn") and int(tokens) > 0
