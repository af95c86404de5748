"""Traces leave real processes over OTLP/HTTP and continue where the caller's trace left off.

The receiver stands where an OpenTelemetry Collector would and decodes the official protobuf
messages (none from PyPI or Debian runs here: see docs/observability.md). Two real-process cases:

- ``nexus serve`` with tracing and JSON logs: a message POSTed with a W3C ``traceparent`` is one
  trace from the caller's span through the HTTP request, the queue item and the run to the model
  call, and the log line of its run carries that trace id — and not the key the provider quoted;
- a message accepted by one process that is then SIGKILLed mid-run is claimed by the next
  process (``nexus queue drain``) in the same trace: the context travels in the queue item.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from otlp_receiver import OtlpReceiver
from serve_helpers import nexus_env, serving, stop, wait_for

from nexus.testing import FakeProviderServer
from nexus.testing.steps import http_error, stall, text

pytestmark = pytest.mark.slow  # real processes

KEY = "sk-proj-otlptest0123456789abcdefgh"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def write_home(home: Path, provider: FakeProviderServer, receiver: OtlpReceiver, agent: str = "coder") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        f"""default_model = "fake/fake-model"

[telemetry]
tracing = true
otlp_endpoint = "{receiver.endpoint}"
otlp_headers = {{ "x-collector-key" = "${{COLLECTOR_KEY}}" }}
service_name = "nexus-under-test"

[providers.fake]
api = "openai-completions"
base_url = "{provider.openai_base_url}"
api_key = "${{FAKE_KEY}}"

[agents.{agent}]
""",
        encoding="utf-8",
    )


def env_for(home: Path) -> dict[str, str]:
    # export batches every 50 ms, so a process killed a moment later has sent what it recorded
    return nexus_env(home, FAKE_KEY=KEY, COLLECTOR_KEY="collector-secret-0123", OTEL_BSP_SCHEDULE_DELAY="50")


def test_an_http_traceparent_is_continued_to_the_model_call_and_the_log_line(isolated_env: Path) -> None:
    script = (http_error(401, f"Incorrect API key provided: {KEY}"), text("the answer"))
    with OtlpReceiver() as receiver, FakeProviderServer(*script) as provider:
        write_home(isolated_env, provider, receiver)
        with serving(isolated_env, "--log-format", "json", env=env_for(isolated_env)) as (process, url):
            for n in (1, 2):
                sent = httpx.post(
                    f"{url}/v1/agents/coder/messages",
                    json={"content": f"message {n}", "id": f"m-{n}", "mode": "followup"},
                    headers={"traceparent": f"00-{CALLER_TRACE[:-1]}{n}-{CALLER_SPAN}-01"},
                    timeout=10,
                )
                assert sent.status_code == 202, sent.text
            wait_for(lambda: len(receiver.named("invoke_agent coder")) == 2, "both runs' spans")
            stderr = stop(process)
    first, second = (f"{CALLER_TRACE[:-1]}{n}" for n in (1, 2))
    in_first = [span for span in receiver.spans if span.trace_id == first]
    by_name = {span.name: span for span in in_first}
    request = by_name["POST /v1/agents/{agent_id}/messages"]
    assert request.parent_span_id == CALLER_SPAN and request.kind == 2  # SPAN_KIND_SERVER
    accept, wait, run, chat = (by_name[name] for name in ("accept coder", "queue coder", "invoke_agent coder",
                                                          "chat fake-model"))  # fmt: skip
    assert accept.parent_span_id == request.span_id
    assert wait.parent_span_id == accept.span_id and run.parent_span_id == wait.span_id
    assert chat.parent_span_id == run.span_id and chat.attributes["error.type"] == "auth_permanent"
    assert run.attributes["nexus.stop_reason"] == "error" and run.service == "nexus-under-test"
    assert {span.name for span in receiver.spans if span.trace_id == second} >= {
        "invoke_agent coder",
        "chat fake-model",
    }

    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("event") == "request"]  # the request lines are JSON too
    assert {(r["method"], r["path"], r["status"]) for r in requests} == {("POST", "/v1/agents/coder/messages", 202)}
    assert not any(line.startswith("nexus serve: POST") for line in stderr.splitlines())
    ends = {line["trace_id"]: line for line in lines if line.get("event") == "run_end"}
    assert set(ends) == {first, second}
    assert ends[first]["level"] == "warning" and ends[first]["stop_reason"] == "error"
    assert "[redacted]" in ends[first]["error"]
    assert ends[second]["level"] == "info" and ends[second]["turn_id"]
    assert KEY not in stderr and "collector-secret-0123" not in stderr
    assert all(KEY not in json.dumps(span.attributes) for span in receiver.spans)


def test_a_message_accepted_before_a_crash_is_claimed_in_the_same_trace(isolated_env: Path) -> None:
    with OtlpReceiver() as receiver, FakeProviderServer(stall(after_chunks=1, seconds=60), text("done")) as provider:
        write_home(isolated_env, provider, receiver)
        env = env_for(isolated_env)
        sender = subprocess.Popen(
            [sys.executable, "-m", "nexus.cli", "send", "coder", "hello", "--id", "m-crash"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: receiver.named("queue coder") and len(provider.requests) == 1, "the first run")
        finally:
            sender.send_signal(signal.SIGKILL)
            sender.communicate(timeout=30)
        drained = subprocess.run(
            [sys.executable, "-m", "nexus.cli", "queue", "drain"], env=env, capture_output=True, text=True, timeout=120
        )
        assert drained.returncode == 0, drained.stderr
        wait_for(lambda: len(receiver.named("invoke_agent coder")) == 1, "the second run's span")
    (accept,) = receiver.named("accept coder")
    first_wait, second_wait = sorted(receiver.named("queue coder"), key=lambda span: span.attributes["nexus.attempts"])
    (run,) = receiver.named("invoke_agent coder")  # the first run was killed before its span ended
    assert first_wait.parent_span_id == second_wait.parent_span_id == accept.span_id
    assert {first_wait.trace_id, second_wait.trace_id, run.trace_id} == {accept.trace_id}
    assert second_wait.attributes["nexus.attempts"] == 2 and run.parent_span_id == second_wait.span_id
    ms = 1_000_000  # the queue span starts when the item was accepted (stored in ms), not when it was claimed;
    # the first wait ends at the first claim, which a fast machine makes within the accept's last millisecond
    assert accept.start_ns // ms <= second_wait.start_ns // ms <= accept.end_ns // ms <= first_wait.end_ns // ms


def test_a_one_shot_command_gives_a_collector_that_refuses_a_short_retry_budget(isolated_env: Path) -> None:
    """`nexus run` exports at exit; against a collector answering 503 the exporter retries with backoff
    (1 s, 2 s, 4 s ...) until its budget runs out: the SDK's 10 s allow four attempts, a one-shot
    command's 2 s two, so the exit is not held up by a collector that is down."""
    with OtlpReceiver(unavailable=True) as receiver, FakeProviderServer(text("hello")) as provider:
        write_home(isolated_env, provider, receiver)
        env = {**env_for(isolated_env), "OTEL_BSP_SCHEDULE_DELAY": "600000"}  # one batch, sent at exit
        env.pop("OTEL_EXPORTER_OTLP_TIMEOUT", None)
        env.pop("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", None)
        done = subprocess.run(
            [sys.executable, "-m", "nexus.cli", "run", "hi"], env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    assert "hello" in done.stdout
    assert 1 <= receiver.refused <= 2, receiver.refused
    assert "collector-secret-0123" not in done.stderr
