"""A token-less ``nexus serve`` on loopback is safe from web pages: DNS rebinding and cross-site requests.

A real server process, attacked as a browser would: a page on ``attacker.example`` whose name was
rebound to 127.0.0.1 (its requests carry ``Host: attacker.example:PORT``), and a page on another
origin posting ``text/plain`` (a "simple" request a browser sends without asking). The CLI and
same-origin calls (the web UI's) keep working; ``[server] allowed_hosts`` admits a proxy's name.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, http_error

from .test_serve_process import _nexus, _serving, _stop, _write_config

pytestmark = pytest.mark.slow  # real processes

EVIL = "http://evil.example"


def _sessions(url: str) -> list[str]:
    return [s["label"] for s in httpx.get(f"{url}/v1/sessions").json()["sessions"]]


def test_rebinding_and_cross_site_requests_are_refused_and_change_nothing(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider)
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            port = url.rsplit(":", 1)[1]
            before = _sessions(url)
            rebound = httpx.get(f"{url}/v1/sessions", headers={"host": f"attacker.example:{port}"})
            assert rebound.status_code == 403, rebound.text
            error = rebound.json()["error"]
            assert error["type"] == "forbidden" and "allowed_hosts" in error["message"]
            page = httpx.get(f"{url}/", headers={"host": f"attacker.example:{port}"})
            assert page.status_code == 403  # not even the page: a rebound name gets nothing from this server
            planted = httpx.post(
                f"{url}/v1/sessions/import", params={"label": "planted"}, content=b'{"type":"session"}\n',
                headers={"origin": EVIL, "content-type": "text/plain"},
            )  # fmt: skip
            assert planted.status_code == 403, planted.text
            plain = httpx.post(
                f"{url}/v1/sessions/import", params={"label": "planted"}, content=b'{"type":"session"}\n',
                headers={"content-type": "text/plain"},
            )  # fmt: skip
            assert plain.status_code == 415 and "application/x-ndjson" in plain.json()["error"]["message"]
            aborted = httpx.post(f"{url}/v1/agents/coder/abort", headers={"origin": EVIL})
            assert aborted.status_code == 403, aborted.text
            message = httpx.post(
                f"{url}/v1/agents/coder/messages", content=json.dumps({"content": "rm -rf ~"}),
                headers={"origin": "null", "content-type": "text/plain"},
            )  # fmt: skip
            assert message.status_code == 403
            assert _sessions(url) == before  # nothing planted
            queue = httpx.get(f"{url}/v1/agents/coder/queue").json()["items"]
            assert queue == []  # nothing queued
            # the web UI's own calls (same origin) and the CLI's (no Origin) still work
            same = httpx.post(
                f"{url}/v1/agents/coder/messages", json={"content": "hi from the page"}, headers={"origin": url}
            )
            assert same.status_code == 202, same.text
            by_name = httpx.get(f"http://localhost:{port}/v1/sessions")
            assert by_name.status_code == 200
            sent = _nexus(isolated_env, "send", "coder", "hi from the cli", "--wait", "--timeout", "30")
            assert sent.returncode == 0, sent.stderr
            _stop(process)


def test_allowed_hosts_admits_a_reverse_proxys_name(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider, 'allowed_hosts = ["nexus.example.com"]')
        with _serving(isolated_env) as (process, url):
            proxied = httpx.get(f"{url}/v1/sessions", headers={"host": "nexus.example.com"})
            assert proxied.status_code == 200, proxied.text
            other = httpx.get(f"{url}/v1/sessions", headers={"host": "other.example.com"})
            assert other.status_code == 403
            form = httpx.post(
                f"{url}/v1/agents", json={"id": "helper"},
                headers={"host": "nexus.example.com", "origin": "https://nexus.example.com"},
            )  # fmt: skip
            assert form.status_code == 201, form.text  # a page served through the proxy is this server's own
            _stop(process)


def test_require_token_guards_a_loopback_server_with_a_per_start_token(isolated_env: Path) -> None:
    """Other users of the machine can reach 127.0.0.1 too: ``require_token`` closes it, Jupyter's way."""
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider, "require_token = true")
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        tokens = []
        for _ in range(2):
            with _serving(isolated_env) as (process, url):
                token = json.loads((isolated_env / "server.json").read_text())["token"]
                assert len(token) >= 32 and token not in tokens  # a new one each start
                tokens.append(token)
                assert httpx.get(f"{url}/v1/sessions").status_code == 401
                bearer = {"authorization": f"Bearer {token}"}
                assert httpx.get(f"{url}/v1/sessions", headers=bearer).status_code == 200
                assert httpx.get(f"{url}/").status_code == 200  # the page itself holds no data
                sent = _nexus(isolated_env, "send", "coder", "hi", "--wait", "--timeout", "30")  # reads server.json
                assert sent.returncode == 0, sent.stderr
                stderr = _stop(process)
            assert f"{url}/#token={token}" in stderr  # the web UI's address, token included, for its user only
        old = {"authorization": f"Bearer {tokens[0]}"}
        with _serving(isolated_env) as (process, url):
            assert httpx.get(f"{url}/v1/sessions", headers=old).status_code == 401  # an earlier start's token
            _stop(process)


def test_the_per_start_token_is_never_repeated_in_an_error_text(isolated_env: Path) -> None:
    """Redaction knows the configured tokens; the token of the start is registered the same way."""
    with FakeProviderServer() as provider:
        _write_config(isolated_env, provider, "require_token = true")
        assert _nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with _serving(isolated_env) as (process, url):
            token = json.loads((isolated_env / "server.json").read_text())["token"]
            provider.script(*[http_error(401, f"invalid key; you sent {token}")] * 4)
            ask = {"model": "coder", "messages": [{"role": "user", "content": "hi"}]}
            failed = httpx.post(
                f"{url}/v1/chat/completions", json=ask, headers={"authorization": f"Bearer {token}"}, timeout=60
            )
            assert failed.status_code == 502 and "invalid key" in failed.text, failed.text
            assert token not in failed.text
            stderr = _stop(process)
        assert stderr.count(token) == 1  # only the web UI's address, which is for its user
