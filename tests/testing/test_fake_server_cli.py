"""``python -m nexus.testing.fake_server``: prints its URL, serves a JSON script or echoes, logs requests."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nexus.testing.fake_server", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


def _start(procs: list[subprocess.Popen[str]], *args: str) -> str:
    proc = _spawn(*args)
    procs.append(proc)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return url


def test_script_file_and_request_log(tmp_path: Path, spawn: list[subprocess.Popen[str]]) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "scripted hello"}, {"http_error": 429, "retry_after": 2}]))
    log = tmp_path / "requests.jsonl"
    url = _start(spawn, "--script", str(script), "--log", str(log))
    body = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
    first = httpx.post(url + "/v1/chat/completions", json=body)
    assert first.json()["choices"][0]["message"]["content"] == "scripted hello"
    second = httpx.post(url + "/v1/messages", json=body)
    assert second.status_code == 429 and second.headers["retry-after"] == "2"
    third = httpx.post(url + "/v1/messages", json=body)  # script used up: echo
    assert third.json()["content"][0]["text"] == "ping"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [entry["path"] for entry in lines] == ["/v1/chat/completions", "/v1/messages", "/v1/messages"]
    assert lines[0]["body"] == body
    spawn[0].terminate()
    assert spawn[0].wait(timeout=10) == 0


def test_no_echo_answers_500_when_empty(spawn: list[subprocess.Popen[str]]) -> None:
    url = _start(spawn, "--no-echo")
    response = httpx.post(url + "/v1/chat/completions", json={"model": "m", "messages": []})
    assert response.status_code == 500


def test_bad_script_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps([{"text": "ok"}, {"what": 1}]))
    done = subprocess.run(
        [sys.executable, "-m", "nexus.testing.fake_server", "--script", str(script)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "step 1: unknown step" in done.stderr and str(script) in done.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "nexus.testing.fake_server", "--script", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2 and "cannot load script" in missing.stderr


def test_a_stall_step_goes_quiet_then_finishes_when_run_as_a_module(
    tmp_path: Path, spawn: list[subprocess.Popen[str]]
) -> None:
    # the module's main() ran before the stall's helper was defined: every stall step ended the stream
    # with a NameError under `python -m` (imported by tests, it worked)
    script = tmp_path / "stall.json"
    script.write_text(json.dumps([{"stall": {"after_chunks": 2, "seconds": 0.5, "then": {"text": "after the pause"}}}]))
    url = _start(spawn, "--script", str(script))
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "ping"}]}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=10) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    chunks = [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]
    said = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert said == "after the pause" and lines[-1] == "data: [DONE]"
    spawn[0].terminate()
    _, stderr = spawn[0].communicate(timeout=10)
    assert "Traceback" not in stderr, stderr
