"""The browser-facing checks in front of the API: Host names, OPTIONS, CORS with tokens, Origin, body types.

The attacks themselves run against a real ``nexus serve`` in ``test_serve_browser_guard.py``; these
pin the rules at the edges (over the ASGI app: no socket needed to read a header).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from nexus.config._host_names import HostName, parse_host
from nexus.config._server_schema import ServerConfig
from nexus.errors import ConfigError
from nexus.ledger import Ledger, NewSession
from nexus.ledger.broker_store import BrokerStore
from nexus.server._hosts import HostRules
from nexus.server._state import ServerState
from nexus.server.app import create_app

PAGE = "https://app.example.com"


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    with Ledger.open(tmp_path / "agents.db") as opened:
        await opened.sessions.create(NewSession("main"))
        yield opened


def _client(ledger: Ledger, config: ServerConfig, base: str = "http://127.0.0.1:8700") -> httpx.AsyncClient:
    app = create_app(ServerState(ledger, BrokerStore(ledger.database)), config)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)


async def test_a_cors_preflight_is_answered_before_the_token_check_and_a_401_is_readable(ledger: Ledger) -> None:
    config = ServerConfig(tokens=["s3cret"], cors_origins=[PAGE])
    async with _client(ledger, config) as client:
        preflight = await client.options(
            "/v1/agents",
            headers={"origin": PAGE, "access-control-request-method": "POST",
                     "access-control-request-headers": "authorization, content-type"},
        )  # fmt: skip
        assert preflight.status_code == 204, preflight.text  # was 401: the preflight never carries a token
        assert preflight.headers["access-control-allow-origin"] == PAGE
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
        refused = await client.get("/v1/sessions", headers={"origin": PAGE})
        assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == PAGE
        posted = await client.post(
            "/v1/sessions/main/fork", json={"turn_id": "x"}, headers={"origin": PAGE, "authorization": "Bearer s3cret"}
        )
        assert posted.status_code == 404 and posted.headers["access-control-allow-origin"] == PAGE  # reached the route
        other = await client.options(
            "/v1/agents", headers={"origin": "https://evil.example", "access-control-request-method": "POST"}
        )
        assert "access-control-allow-origin" not in other.headers


async def test_options_answers_the_allowed_methods_not_405(ledger: Ledger) -> None:
    async with _client(ledger, ServerConfig(tokens=["s3cret"])) as client:
        agents = await client.options("/v1/agents")
        assert agents.status_code == 204, agents.text
        assert agents.headers["allow"] == "GET, POST, OPTIONS"
        one = await client.options("/v1/agents/coder")
        assert one.headers["allow"] == "DELETE, GET, OPTIONS"
        assert (await client.options("/v1/nowhere")).status_code == 404
        preflight_without_cors = await client.options(
            "/v1/agents", headers={"origin": PAGE, "access-control-request-method": "POST"}
        )
        assert preflight_without_cors.status_code == 204
        assert "access-control-allow-origin" not in preflight_without_cors.headers  # the browser stops here


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"origin": "http://127.0.0.1:8700"}, 201),  # the web UI: its own origin
        ({"origin": "http://127.0.0.1:9999"}, 403),  # another local web app
        ({"origin": "http://localhost:8700"}, 403),  # the request said Host 127.0.0.1: another origin
        ({"origin": "null"}, 403),  # a sandboxed frame or a file
        ({"origin": PAGE}, 201),  # listed in cors_origins
        ({}, 201),  # curl, the CLI, the SDK: no Origin
    ],
)
async def test_a_state_change_is_accepted_only_from_the_servers_own_origin_or_a_cors_origin(
    ledger: Ledger, headers: dict[str, str], status: int
) -> None:
    async with _client(ledger, ServerConfig(cors_origins=[PAGE])) as client:
        response = await client.post("/v1/agents", json={"id": "coder"}, headers=headers)
        assert response.status_code == status, response.text
        reading = await client.get("/v1/sessions", headers=headers)  # reads stay open (the browser hides answers)
        assert reading.status_code == 200


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
async def test_a_body_that_is_not_json_is_415_and_stores_nothing(ledger: Ledger, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    async with _client(ledger, ServerConfig()) as client:
        agent = await client.post("/v1/agents", content=b'{"id": "coder"}', headers=headers)
        assert agent.status_code == 415 and agent.json()["error"]["type"] == "unsupported_media_type"
        assert "application/json" in agent.json()["error"]["message"]
        imported = await client.post("/v1/sessions/import", content=b'{"type":"session"}\n', headers=headers)
        assert imported.status_code == 415 and "application/x-ndjson" in imported.json()["error"]["message"]
        typed = await client.post(
            "/v1/agents", content=b'{"id": "coder"}', headers={"content-type": "application/json; charset=utf-8"}
        )
        assert typed.status_code == 201
    assert [s.label for s in await ledger.sessions.list()] == ["agent:coder", "main"]


async def test_a_session_file_sent_as_json_is_415_naming_json_lines(ledger: Ledger) -> None:
    """A trial posted a good pi file with ``Content-Type: application/json``: the framework parsed the JSON lines
    as one document and answered 422 "not valid JSON at character 140 (Extra data)" about a valid file."""
    session_file = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}\n' * 2
    async with _client(ledger, ServerConfig()) as client:
        for content_type in ("application/json", "application/json; charset=utf-8", "application/vnd.pi+json"):
            sent = await client.post(
                "/v1/sessions/import", content=session_file, headers={"content-type": content_type}
            )
            assert sent.status_code == 415, sent.text
            message = sent.json()["error"]["message"]
            assert "must be sent as JSON lines" in message and "application/x-ndjson" in message, message
    assert [s.label for s in await ledger.sessions.list()] == ["main"]


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8700", True), ("localhost:8700", True), ("LOCALHOST.:1", True), ("[::1]:8700", True),
        ("127.9.9.9", True), ("box.lan:8700", True), ("proxy.example.com", True), ("only.example.com:443", True),
        ("only.example.com:8443", False), ("attacker.example:8700", False), ("10.0.0.9:8700", False),
        ("", False), ("a b", False), ("[::1", False), ("x:99999", False), ("evil.example/x", False),
    ],
)  # fmt: skip
def test_host_names_this_server_answers_to(host: str, allowed: bool) -> None:
    allowed_hosts = ["proxy.example.com", "only.example.com:443"]
    rules = HostRules(bound_host="box.lan", allowed_hosts=allowed_hosts, cors_origins=[])
    assert rules.host_allowed(parse_host(host), "127.0.0.1") is allowed
    assert rules.host_allowed(parse_host("10.0.0.9:8700"), "10.0.0.9")  # the address the connection arrived on


def test_host_parsing() -> None:
    assert parse_host("[::1]:8700") == HostName("::1", 8700)
    assert parse_host("Example.COM") == HostName("example.com")
    assert parse_host("::1") == HostName("::1")
    assert parse_host("x:0") is None and parse_host("x:port") is None and parse_host("u@x") is None


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [("http://nexus.example.com", "not a URL"), ("*.example.com", "not a host name"), ("a b", "not a host name")],
)
def test_a_bad_allowed_hosts_entry_is_a_config_error_naming_it(tmp_path: Path, entry: str, fragment: str) -> None:
    from nexus.config import load_config

    path = tmp_path / "nexus.toml"
    path.write_text(f'[server]\nallowed_hosts = ["{entry}"]\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert "allowed_hosts" in str(caught.value) and fragment in str(caught.value)


async def test_every_path_answers_options_and_an_undocumented_method_with_the_documented_allow(ledger: Ledger) -> None:
    """OPTIONS was 405; a 405's Allow named only the first route the router tried (``GET`` for /v1/agents)."""
    async with _client(ledger, ServerConfig()) as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
        for path in paths:
            concrete = path.replace("{label}", "main").replace("{turn_id}", "t1").replace("{agent_id}", "coder")
            methods = {  # every documented operation whose template matches (/sessions/import is also a {label})
                method.upper()
                for template, operations in paths.items()
                if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), concrete)
                for method in operations
            }
            allow = ", ".join([*sorted(methods), "OPTIONS"])
            options = await client.options(concrete)
            assert (options.status_code, options.headers["allow"]) == (204, allow), path
            refused = await client.request("PUT", concrete)  # no path has PUT
            assert (refused.status_code, refused.headers["allow"]) == (405, allow), path
            assert refused.json()["error"]["type"] == "method_not_allowed"


async def test_the_api_docs_page_runs_only_pinned_integrity_checked_scripts_and_cannot_be_framed(
    ledger: Ledger,
) -> None:
    """A script on ``/docs`` runs in the API's origin: it could read every session and post to agents.

    FastAPI's page loaded ``swagger-ui-dist@5`` (whatever 5.x the CDN serves that day) with no
    Content-Security-Policy, so the page could also be framed. (Swagger UI rendering under this
    policy was checked in Chromium against a local copy of the pinned files.)
    """
    async with _client(ledger, ServerConfig()) as client:
        page = await client.get("/docs")
        assert page.status_code == 200
        policy = page.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy, policy
        script_sources = re.search(r"script-src ([^;]*)", policy)
        assert script_sources is not None
        for source in script_sources.group(1).split():  # this origin, or one exact file of a pinned release
            assert source == "'self'" or re.fullmatch(r"https://\S+@\d+\.\d+\.\d+/\S+\.js", source), source
        assert page.headers["x-content-type-options"] == "nosniff"
        for tag in re.findall(r"<script[^>]*>", page.text) + re.findall(r"<link[^>]*>", page.text):
            src = re.search(r'(?:src|href)="([^"]+)"', tag)
            assert src is not None, tag
            if not src.group(1).startswith("/"):
                assert re.search(r'integrity="sha384-[A-Za-z0-9+/=]{64}"', tag), tag
        assert "<script>" not in page.text  # no inline script
        start = await client.get("/docs/start.js")
        assert start.status_code == 200 and "SwaggerUIBundle" in start.text
        assert (await client.get("/redoc")).status_code == 404  # its unpinned bundle and web fonts are not served
