"""The fixtures reach users' test suites through the ``pytest11`` entry point, with no conftest at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USER_TEST = """
from nexus.llm import Context, Model, StreamOptions, UserMessage, complete
from nexus.testing import steps


async def test_fake_provider(fake_provider):
    fake_provider.script(steps.text("hi there"), steps.http_error(429, retry_after=2))
    model = Model(id="x", provider="openai", api="openai-completions", base_url=fake_provider.openai_base_url)
    ctx = Context(messages=[UserMessage("q")])
    assert (await complete(model, ctx, StreamOptions(api_key="k"))).text == "hi there"
    failed = await complete(model, ctx, StreamOptions(api_key="k"))
    assert (failed.error_kind, failed.retry_after) == ("rate_limit", 2.0)
    fake_provider.assert_complete()


async def test_scripted_model(scripted_model):
    scripted_model.append(steps.text("yo"))
    assert (await complete(scripted_model.model, Context(messages=[UserMessage("q")]))).text == "yo"
"""


def _run_pytest(directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto", *extra]
    return subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=120)


def test_fixtures_work_without_any_conftest(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(USER_TEST, encoding="utf-8")
    done = _run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_plugin_can_be_switched_off_by_its_entry_point_name(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(USER_TEST, encoding="utf-8")
    done = _run_pytest(tmp_path, "-p", "no:nexus_testing")
    assert done.returncode != 0
    assert "fixture 'fake_provider' not found" in done.stdout
