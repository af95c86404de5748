"""``nexus run`` (a real subprocess) with ``NEXUS_CAPTURE_DIR`` or ``capture_dir`` in nexus.toml: a bug report
that becomes a test — the capture holds no key and replays to the same answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.config import load_config
from nexus.errors import ConfigError
from nexus.llm import Model, StreamOptions, UserMessage, complete
from nexus.llm.capture import ENV_VAR, load_capture
from nexus.llm.types import Context
from nexus.testing import FakeProviderServer
from nexus.testing.steps import replay, text

SRC = Path(__file__).resolve().parents[2] / "src"
KEY = "sk-cli-CaptureSecret-0123456789abcdef"


def _config(home: Path, server: FakeProviderServer, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        f'default_model = "fake/fake-model"\n{extra}\n'
        f'[providers.fake]\napi = "openai-completions"\nbase_url = "{server.openai_base_url}"\napi_key = "{KEY}"\n',
        encoding="utf-8",
    )


def _run(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != ENV_VAR}
    full = {**base, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args], capture_output=True, text=True, env=full, timeout=60, check=False
    )


async def _replayed_text(path: Path) -> str:
    async with FakeProviderServer(replay(path, 37)) as server:
        model = Model(id="fake-model", provider="fake", api="openai-completions", base_url=server.openai_base_url)
        message = await complete(model, Context(messages=[UserMessage("again")]), StreamOptions(api_key="k"))
    return message.text


async def test_nexus_run_with_the_variable_captures_a_replayable_keyless_file(tmp_path: Path) -> None:
    home, captures = tmp_path / "home", tmp_path / "report"
    with FakeProviderServer(text("The answer is 42.")) as server:
        _config(home, server)
        result = _run(home, "run", "what is the answer?", env={ENV_VAR: str(captures)})
    assert result.returncode == 0, result.stderr
    assert "The answer is 42." in result.stdout
    (path,) = sorted(captures.glob("*.capture"))
    assert KEY.encode() not in path.read_bytes()
    record = load_capture(path)
    assert record.request_headers["authorization"] == "[redacted]"
    assert record.url == f"{server.openai_base_url}/chat/completions"
    assert "what is the answer?" in str(record.request)
    assert await _replayed_text(path) == "The answer is 42."


def test_capture_dir_in_the_config_is_relative_to_nexus_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with FakeProviderServer(text("from config")) as server:
        _config(home, server, extra='capture_dir = "captures"')
        result = _run(home, "run", "hi")
    assert result.returncode == 0, result.stderr
    (path,) = sorted((home / "captures").glob("*.capture"))
    assert KEY.encode() not in path.read_bytes() and b"from config" in path.read_bytes()


def test_capture_dir_must_be_a_string(tmp_path: Path) -> None:
    path = tmp_path / "nexus.toml"
    path.write_text("capture_dir = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="capture_dir"):
        load_config(path)
