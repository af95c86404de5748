"""The providers' transport: plain http builds no TLS context; https verifies, through a pool made on first use.

Real loopback servers (one plain, one TLS with a self-signed certificate from ``tls/``) and the
shared client of ``nexus.llm._http``, as a provider uses it.
"""

from __future__ import annotations

import asyncio
import http.server
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nexus.llm._http import aclose_client, get_client

TLS = Path(__file__).parent / "tls"


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: Any) -> None:
        pass


def _serve(tls: bool) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(TLS / "loopback-cert.pem", TLS / "loopback-key.pem")
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def plain_url() -> Iterator[str]:
    yield from _serve(tls=False)


@pytest.fixture
def tls_url() -> Iterator[str]:
    yield from _serve(tls=True)


@pytest.fixture
def verifying_contexts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every certificate-verifying TLS context httpx creates (it calls ``ssl.create_default_context``)."""
    made: list[object] = []
    real: Callable[..., ssl.SSLContext] = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        made.append(context)
        return context

    monkeypatch.setattr(ssl, "create_default_context", counted)
    return made


async def _get(url: str) -> httpx.Response:
    try:
        response = await get_client().get(url)
        await response.aread()
        return response
    finally:
        await aclose_client()


def test_plain_http_builds_no_tls_context(plain_url: str, verifying_contexts: list[object]) -> None:
    response = asyncio.run(_get(plain_url))
    assert response.status_code == 200 and response.content == b"hello"
    assert verifying_contexts == []  # loading the certificate store is 20-40 ms a local provider never needs


def test_https_is_verified_by_a_pool_made_on_first_use(
    tls_url: str, verifying_contexts: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):  # self-signed: not trusted
        asyncio.run(_get(tls_url))
    assert len(verifying_contexts) == 1
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "loopback-cert.pem"))  # httpx trusts the environment's CA file
    response = asyncio.run(_get(tls_url))
    assert response.status_code == 200 and response.content == b"hello"


def test_one_client_speaks_both_schemes(plain_url: str, tls_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "loopback-cert.pem"))

    async def both() -> list[bytes]:
        try:
            client = get_client()
            return [(await client.get(url)).content for url in (plain_url, tls_url, plain_url)]
        finally:
            await aclose_client()

    assert asyncio.run(both()) == [b"hello"] * 3
