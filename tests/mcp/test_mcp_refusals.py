"""A server that refuses the start says so in the user's terms (trial15's ``nexus mcp add`` messages).

``cat`` (it echoes the handshake back) was "could not start: Method not found", and an HTTP server's
401 "could not start: Server returned an error response": the SDK drops the status.
"""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp_helpers import config_with

from nexus.mcp import McpServers

pytestmark = pytest.mark.slow


class _Refuser(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status in the server's ``status`` (and a JSON body that is not JSON-RPC)."""

    def _refuse(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"error": "invalid_token"}'
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET = do_DELETE = _refuse

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[Callable[[int], str]]:
    """``refusing(401)`` serves that status to every request on a free port; returns the ``/mcp`` URL."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(status: int) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuser)
        server.status = status  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/mcp"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


async def test_an_http_refusal_names_its_status(
    tmp_path: Path, open_servers: Callable[..., McpServers], refusing: Callable[[int], str]
) -> None:
    urls = {"auth": refusing(401), "gone": refusing(404), "broken": refusing(500)}
    config = config_with(tmp_path, {name: {"url": url} for name, url in urls.items()})
    auth, gone, broken = await open_servers(config).prepare(["auth", "gone", "broken"])
    assert f"MCP server auth ({urls['auth']}) could not start: the server answered HTTP 401 Unauthorized: " in auth
    assert "its token is missing or wrong" in auth
    assert "answered HTTP 404 Not Found: no MCP endpoint at this URL" in gone
    assert "answered HTTP 500 Internal Server Error" in broken


@pytest.mark.skipif(shutil.which("cat") is None, reason="needs cat(1)")
async def test_a_program_that_echoes_the_handshake_is_said_not_to_be_an_mcp_server(
    tmp_path: Path, open_servers: Callable[..., McpServers]
) -> None:
    servers = open_servers(config_with(tmp_path, {"echo": {"command": "cat", "start_timeout_s": 10}}))
    (problem,) = await servers.prepare(["echo"])
    assert "MCP server echo (cat) could not start: it did not answer MCP's handshake" in problem
    assert "is it an MCP server?" in problem
