"""``nexus run`` as a real subprocess against a loopback fake provider: streaming, tools, JSON, failures, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nexus.cli._render import JSON_EVENT_TYPES
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, UserMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import http_error, reply, stall, text, thinking, tool_call

from .fake_config import write_fake_config
from .pipe_reader import PipeReader

SRC = Path(__file__).resolve().parents[2] / "src"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def _nexus(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args],
        capture_output=True,
        text=True,
        env=_env(home),
        input=stdin,
        timeout=60,
        check=False,
    )


def _ledger(home: Path) -> Ledger:
    return Ledger.open(home / "agents.db")


def _user_texts(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    out = []
    for message in messages:
        if message["role"] == "user":
            content = message["content"]
            out.append(content if isinstance(content, str) else "".join(part.get("text", "") for part in content))
    return out


# --------------------------------------------------------------------------- streamed reply + ledger


def test_reply_is_streamed_to_stdout_and_recorded(home: Path, server: FakeProviderServer) -> None:
    server.script(text("Hello from the fake model, streamed in pieces."))
    result = _nexus(home, "run", "hi there")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello from the fake model, streamed in pieces.\n"
    assert "session: main (new)" in result.stderr
    assert any("hi there" in t for t in _user_texts(server.requests[0].body or {}))
    with _ledger(home) as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["completed"]
        history = run_inline(ledger.turns.history("main"))
    assert isinstance(history[-1], AssistantMessage)
    assert history[-1].text == "Hello from the fake model, streamed in pieces."


def test_event_context_names_the_cli_channel_and_local_timezone(home: Path, server: FakeProviderServer) -> None:
    server.script(text("ok"))
    result = subprocess.run(
        [sys.executable, "-m", "nexus.cli", "run", "what time is it?"],
        capture_output=True,
        text=True,
        env={**_env(home), "TZ": "Asia/Tokyo"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [sent] = [t for t in _user_texts(server.requests[0].body or {}) if "what time is it?" in t]
    assert "Channel: cli" in sent
    assert "(Asia/Tokyo)" in sent and "+09:00" in sent


def test_second_run_continues_the_session(home: Path, server: FakeProviderServer) -> None:
    server.script(text("First answer."), text("Second answer."))
    assert _nexus(home, "run", "first question").returncode == 0
    result = _nexus(home, "run", "second question")
    assert result.returncode == 0, result.stderr
    assert "(new)" not in result.stderr, "only a new session is announced"
    sent = _user_texts(server.requests[1].body or {})
    assert any("first question" in t for t in sent) and any("second question" in t for t in sent)
    assert any(
        m.get("role") == "assistant" and "First answer." in str(m.get("content"))
        for m in (server.requests[1].body or {})["messages"]
    )
    with _ledger(home) as ledger:
        turns = run_inline(ledger.turns.path("main"))
    assert len(turns) == 2 and turns[1].parent_turn_id == turns[0].id


def test_session_flag_selects_another_session(home: Path, server: FakeProviderServer) -> None:
    server.script(text("in project x"))
    result = _nexus(home, "run", "-s", "project-x", "hello")
    assert result.returncode == 0, result.stderr
    assert "session: project-x (new)" in result.stderr
    with _ledger(home) as ledger:
        assert len(run_inline(ledger.turns.path("project-x"))) == 1
        assert [s.label for s in run_inline(ledger.sessions.list())] == ["project-x"]


def test_stdin_dash_reads_the_message(home: Path, server: FakeProviderServer) -> None:
    server.script(text("got it"))
    result = _nexus(home, "run", "-", stdin="a message\nover two lines\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "got it\n"
    assert any("a message\nover two lines" in t for t in _user_texts(server.requests[0].body or {}))


# --------------------------------------------------------------------------- tools


def test_tool_activity_on_stderr_and_file_in_workspace(home: Path, server: FakeProviderServer) -> None:
    server.script(
        tool_call("write", {"path": "notes.txt", "content": "one\ntwo\nthree\n"}),
        tool_call("read", {"path": "notes.txt"}),
        tool_call("bash", {"command": "echo oops; exit 3"}),
        text("All done."),
    )
    result = _nexus(home, "run", "make notes")
    assert result.returncode == 0, result.stderr
    assert (home / "workspace" / "notes.txt").read_text() == "one\ntwo\nthree\n"
    err = result.stderr
    assert "→ write path=notes.txt content=<14 chars>" in err
    assert "✓ write (14 bytes)" in err
    assert "→ read path=notes.txt" in err
    assert "✓ read (" in err
    assert "→ bash command=echo oops; exit 3" in err
    assert "✗ bash: exit 3" in err
    assert result.stdout.strip() == "All done.", "tool output never reaches stdout"
    with _ledger(home) as ledger:
        turn = run_inline(ledger.turns.path("main"))[0]
        calls = run_inline(ledger.turns.tool_calls(turn.id))
    assert [c.tool_name for c in calls] == ["write", "read", "bash"]


# --------------------------------------------------------------------------- --json


def test_max_iterations_stops_with_a_notice(isolated_env: Path, server: FakeProviderServer) -> None:
    write_fake_config(isolated_env, server, "[agent]\nmax_iterations = 2\n")
    server.script(*(tool_call("ls", {}, id=f"c{i}") for i in range(4)))
    result = _nexus(isolated_env, "run", "keep listing")
    assert result.returncode == 0, result.stderr
    assert "reached agent.max_iterations" in result.stderr and "max_iterations" in result.stderr
    assert len(server.requests) == 2, "no model call beyond max_iterations"
    with _ledger(isolated_env) as ledger:
        [turn] = run_inline(ledger.turns.path("main"))
    assert turn.status == "completed" and turn.tool_call_count == 2


def test_output_limit_stops_with_a_notice(home: Path, server: FakeProviderServer) -> None:
    server.script(reply(text("The answer begins here and then"), stop_reason="length"))
    result = _nexus(home, "run", "write a long essay")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The answer begins here and then\n", "the notice is not mixed into the reply"
    notices = [line for line in result.stderr.splitlines() if "output limit" in line]
    assert len(notices) == 1 and notices[0].startswith("nexus: stopped:")
    assert "(max_tokens)" in notices[0] and "continue" in notices[0]
    with _ledger(home) as ledger:
        [turn] = run_inline(ledger.turns.path("main"))
    assert turn.status == "completed"

    server.script(reply(text("cut again"), stop_reason="length"))
    as_json = _nexus(home, "run", "--json", "go on")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout.splitlines()[-1])["stopReason"] == "max_tokens"
    assert "output limit" not in as_json.stderr, "--json carries stopReason; no text notice"


def test_a_complete_reply_has_no_stop_notice(home: Path, server: FakeProviderServer) -> None:
    server.script(text("All done."))
    result = _nexus(home, "run", "short answer please")
    assert result.returncode == 0, result.stderr
    assert "stopped" not in result.stderr and "output limit" not in result.stderr


def _second_run_once_it_waits(home: Path, waits: threading.Event) -> subprocess.CompletedProcess[str]:
    """``nexus run "second question"``; ``waits`` is set once its stderr says it waits for the other run (or
    it ended)."""
    args = [sys.executable, "-m", "nexus.cli", "run", "second question"]
    second = subprocess.Popen(args, env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert second.stderr is not None
    seen = ""
    while line := second.stderr.readline():
        seen += line
        if "waiting for another run" in line:
            break
    waits.set()
    out, err = second.communicate(timeout=60)
    return subprocess.CompletedProcess(args, second.returncode, out, seen + err)


def test_parallel_runs_of_one_session_queue_instead_of_forking(home: Path, server: FakeProviderServer) -> None:
    # the first run must still be busy when the second has started up (1 s, then 5 s, was a guess a loaded
    # machine could beat): it stalls until the second says it waits
    second_waits = threading.Event()
    server.script(
        stall(after_chunks=2, seconds=120, then=text("first answer"), release=second_waits), text("second answer")
    )
    first = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "run", "first question"],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.requests, "the first run reached the model"
        second = _second_run_once_it_waits(home, second_waits)
        assert first.wait(timeout=30) == 0
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 0, second.stderr
    assert "waiting for another run of session main" in second.stderr
    assert second.stdout.strip() == "second answer"
    assert any("first question" in t for t in _user_texts(server.requests[1].body or {}))
    with _ledger(home) as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["completed", "completed"]
        assert turns[1].parent_turn_id == turns[0].id, "the second turn follows the first: no side branch"


def test_json_events_have_documented_types(home: Path, server: FakeProviderServer) -> None:
    server.script(tool_call("ls", {}), text("The workspace is listed above."))
    result = _nexus(home, "run", "--json", "list files")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(e["type"] in JSON_EVENT_TYPES for e in events)
    assert events[0]["type"] == "stream_start"
    assert events[0]["sessionLabel"] == "main" and events[0]["model"] == "fake/fake-model"
    assert events[0]["sessionCreated"] is True
    end = events[-1]
    assert end["type"] == "stream_end" and end["final"] is True
    assert end["status"] == "completed" and end["stopReason"] == "end_turn"
    assert end["runId"] == events[0]["runId"]
    assert "".join(e["text"] for e in events if e["type"] == "token") == "The workspace is listed above."
    assert end["text"] == "The workspace is listed above."
    assert end["usage"]["output"] > 0 and end["usage"]["total"] >= end["usage"]["output"]
    assert end["toolCalls"] == 1
    statuses = [(e["toolName"], e["status"]) for e in events if e["type"] == "tool_status"]
    assert statuses == [("ls", "started"), ("ls", "completed")]
    with _ledger(home) as ledger:
        head = run_inline(ledger.sessions.head("main"))
    assert head is not None and end["turnId"] == head.id


def test_json_failure_has_stream_error_then_stream_end(home: Path, server: FakeProviderServer) -> None:
    server.script(http_error(401))
    result = _nexus(home, "run", "--json", "hi")
    assert result.returncode == 1
    events = [json.loads(line) for line in result.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "stream_start" and types[-2:] == ["stream_error", "stream_end"]
    assert events[-2]["partial"] is False
    assert events[-1]["status"] == "failed"


def test_json_config_error_is_reported_in_band(isolated_env: Path) -> None:
    result = _nexus(isolated_env, "run", "--json", "-m", "not-a-model-ref", "hi")
    assert result.returncode == 2
    event = json.loads(result.stdout.splitlines()[-1])
    assert event["type"] == "stream_error" and "provider/model" in event["error"]


# --------------------------------------------------------------------------- reasoning and notices


def test_reasoning_is_shown_on_stderr_only_with_thinking(home: Path, server: FakeProviderServer) -> None:
    with (home / "nexus.toml").open("a") as toml:
        toml.write("[providers.fake.models.fake-model]\nreasoning = true\n")
    server.script(reply(thinking("pondering the question"), text("the answer")))
    shown = _nexus(home, "run", "--thinking", "low", "why?")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "the answer\n"
    assert "pondering the question" in shown.stderr
    assert (server.requests[0].body or {}).get("reasoning_effort") == "low"
    server.script(reply(thinking("hidden musings"), text("plain answer")))
    hidden = _nexus(home, "run", "why not?")
    assert hidden.stdout == "plain answer\n"
    assert "hidden musings" not in hidden.stderr


def test_profile_rotation_is_a_one_line_notice(isolated_env: Path, server: FakeProviderServer) -> None:
    write_fake_config(isolated_env, server)
    toml = (
        (isolated_env / "nexus.toml")
        .read_text()
        .replace(
            'api_key = "test"\n',
            '[[providers.fake.auth_profiles]]\nname = "first"\napi_key = "k1"\n'
            '[[providers.fake.auth_profiles]]\nname = "second"\napi_key = "k2"\n',
        )
    )
    (isolated_env / "nexus.toml").write_text(toml)
    server.script(http_error(401), text("worked with the second key"))
    result = _nexus(isolated_env, "run", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "worked with the second key\n"
    notices = [line for line in result.stderr.splitlines() if line.startswith("↻")]
    assert len(notices) == 1 and "retrying now with profile second: 401" in notices[0], result.stderr
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer k1", "Bearer k2"]
    server.script(http_error(401), text("again"))
    as_json = _nexus(isolated_env, "run", "--json", "hi")
    retry = [json.loads(line) for line in as_json.stdout.splitlines() if '"retry"' in line]
    assert retry and retry[0]["type"] == "retry" and retry[0]["errorKind"].startswith("auth")


# --------------------------------------------------------------------------- failures


def test_auth_failure_exits_1_with_a_clear_message(home: Path, server: FakeProviderServer) -> None:
    server.script(http_error(401))
    result = _nexus(home, "run", "hi")
    assert result.returncode == 1
    assert "run failed (auth_failure)" in result.stderr
    assert "Traceback" not in result.stderr
    with _ledger(home) as ledger:
        turns = run_inline(ledger.turns.path("main"))
    assert [t.status for t in turns] == ["failed"]
    assert turns[0].error is not None and turns[0].error["kind"] == "auth_failure"


def test_bad_config_exits_2_naming_the_key(isolated_env: Path, server: FakeProviderServer) -> None:
    write_fake_config(isolated_env, server, extra="defualt_thinking = 'high'")
    result = _nexus(isolated_env, "run", "hi")
    assert result.returncode == 2
    assert "defualt_thinking" in result.stderr
    assert not (isolated_env / "agents.db").exists(), "nothing is written when the config is invalid"
    assert server.requests == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "-m", "gpt-4o", "hi"], "provider/model"),
        (["run", "   "], "the message is empty"),
        (["run", "--thinking", "extreme", "hi"], "invalid choice"),
        (["run"], "MESSAGE"),
    ],
)
def test_bad_arguments_exit_2(isolated_env: Path, args: list[str], expected: str) -> None:
    result = _nexus(isolated_env, *args)
    assert result.returncode == 2
    assert expected in result.stderr


def test_no_model_available_exits_2_with_what_to_do(isolated_env: Path) -> None:
    env = _env(isolated_env)
    env["PYTHONPATH"] = str(SRC)
    # hide the local model: a config pointing local.model_path at a missing file
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('[local]\nmodel_path = "missing.gguf"\n', encoding="utf-8")
    result = _nexus(isolated_env, "run", "hi")
    assert result.returncode == 2
    assert "no model to use" in result.stderr and "ANTHROPIC_API_KEY" in result.stderr


def test_open_turn_of_a_dead_process_is_recovered_at_start(home: Path, server: FakeProviderServer) -> None:
    code = (
        "import os; from nexus.ledger import Ledger, NewSession, TurnOpen; from nexus.llm.types import UserMessage\n"
        "from nexus.ledger._sql_db import run_inline\n"
        f"l = Ledger.open({str(home / 'agents.db')!r}); run_inline(l.sessions.ensure(NewSession('main')))\n"
        "run_inline(l.turns.open(TurnOpen('main', [UserMessage('lost question')]))); os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], env=_env(home), check=True, timeout=30)
    server.script(text("fresh answer"))
    result = _nexus(home, "run", "next question")
    assert result.returncode == 0, result.stderr
    assert "closed 1 turn left open" in result.stderr
    with _ledger(home) as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["aborted", "completed"]
        history = run_inline(ledger.turns.history("main"))
    assert isinstance(history[0], UserMessage) and "lost question" in str(history[0].content)


# --------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_aborts_and_records_the_partial_reply(home: Path, server: FakeProviderServer) -> None:
    reply = "The first part arrives quickly, then the model stalls for a long time."
    server.script(stall(after_chunks=3, seconds=60, then=text(reply)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "run", "tell me a story"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    out, err = PipeReader(proc.stdout), PipeReader(proc.stderr)
    out.start()
    err.start()
    try:
        assert out.wait_for("The first"), f"no partial output; stderr: {err.data}"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    out.join(5)
    err.join(5)
    assert "aborted" in err.data
    with _ledger(home) as ledger:
        turns = run_inline(ledger.turns.path("main"))
        assert [t.status for t in turns] == ["aborted"]
        history = run_inline(ledger.turns.history("main"))
    assert isinstance(history[-1], AssistantMessage)
    partial = history[-1].text
    assert partial and reply.startswith(partial), partial
    assert partial in out.data


def test_thinking_on_a_model_without_reasoning_is_noted_once(home: Path, server: FakeProviderServer) -> None:
    server.script(text("plain"))
    result = _nexus(home, "run", "--thinking", "low", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("does not support reasoning") == 1 and "'low' is ignored" in result.stderr
    server.script(text("plain again"))
    quiet = _nexus(home, "run", "hi")
    assert "does not support reasoning" not in quiet.stderr
    with (home / "nexus.toml").open("a") as toml:
        toml.write("[providers.fake.models.fake-model]\nreasoning = true\n")
    server.script(text("thought"))
    able = _nexus(home, "run", "--thinking", "low", "hi")
    assert "does not support reasoning" not in able.stderr


def test_refused_connection_names_the_url(isolated_env: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text(
        'default_model = "fake/m"\n[agent]\nmax_retries = 0\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\napi_key = "sk-secret-value"\n',
        encoding="utf-8",
    )
    result = _nexus(isolated_env, "run", "hi")
    assert result.returncode == 1
    assert f"http://127.0.0.1:{port}/v1" in result.stderr, result.stderr
    assert "sk-secret-value" not in result.stderr
