"""What ``nexus serve`` says: where its web UI and API docs are, and one line per request (no secrets);
``/docs`` opens in a browser even when tokens are set, and takes the token with its Authorize button."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

from .serve_proc import serving, write_config

pytestmark = pytest.mark.slow  # a real server process

TOKEN = "s3cret-t0ken-value"


def _stderr_after_stop(process: object) -> str:
    process.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    _, stderr = process.communicate(timeout=30)  # type: ignore[attr-defined]
    return str(stderr)


def test_the_start_names_the_web_ui_and_every_request_is_one_line_without_secrets(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nexus serve`` was silent, and its start line named only /docs."""
    monkeypatch.setenv("NEXUS_TOKEN", TOKEN)
    with FakeProviderServer(default=echo) as provider:
        write_config(isolated_env, provider, 'tokens = ["${NEXUS_TOKEN}"]')
        with serving(isolated_env) as (process, url):
            auth = {"authorization": f"Bearer {TOKEN}"}
            assert httpx.get(f"{url}/v1/sessions", params={"q": "private words"}, headers=auth).status_code == 200
            assert httpx.get(f"{url}/v1/sessions").status_code == 401
            assert httpx.get(f"{url}/v1/nowhere%0Anexus serve: GET /forged 200 1.0 ms", headers=auth).status_code == 404
            docs = httpx.get(f"{url}/docs")  # no token: a browser cannot send one to open a page
            assert docs.status_code == 200 and "swagger" in docs.text.lower()
            schema = httpx.get(f"{url}/openapi.json").json()
            assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
            stderr = _stderr_after_stop(process)
    assert f"web UI at {url}/ (it asks for one of [server] tokens)" in stderr
    assert f"API docs at {url}/docs (click Authorize" in stderr
    lines = [line for line in stderr.splitlines() if re.match(r"nexus serve: (GET|POST|HEAD) ", line)]
    assert re.fullmatch(r"nexus serve: GET /v1/sessions 200 \d+\.\d ms", lines[0]), lines
    assert re.fullmatch(r"nexus serve: GET /v1/sessions 401 \d+\.\d ms", lines[1]), lines
    assert TOKEN not in stderr and "private words" not in stderr  # no header, no query
    assert not any(line.startswith("nexus serve: GET /forged") for line in stderr.splitlines()), "no forged line"
    assert "nexus serve: GET /v1/nowhere\\nnexus serve: GET /forged" in stderr


def test_quiet_keeps_the_start_lines_and_drops_the_request_lines(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        write_config(isolated_env, provider)
        with serving(isolated_env, "--quiet") as (process, url):
            assert httpx.get(f"{url}/v1/health").status_code == 200
            stderr = _stderr_after_stop(process)
    assert f"web UI at {url}/  ·  API docs at {url}/docs" in stderr
    assert "GET /v1/health" not in stderr
