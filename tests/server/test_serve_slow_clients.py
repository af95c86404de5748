"""Slow-loris against a real ``nexus serve``: connections that never finish a request are closed.

Hundreds of sockets send half a request head, a head and part of a promised body, or nothing
at all, and then stay silent. ``[server] header_timeout_seconds`` / ``body_timeout_seconds``
(short here) must close every one of them, while the server goes on answering others.
"""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo

from .test_serve_process import _serving, _stop, _write_config

pytestmark = pytest.mark.slow  # a real process and 300 sockets

HALF_HEADS, HALF_BODIES, SILENT = 200, 50, 50


def _open(port: int, payload: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if payload:
        sock.sendall(payload)
    sock.setblocking(False)
    return sock


def _closed_by_server(sock: socket.socket, received: dict[socket.socket, bytes]) -> bool:
    """True once the server closed the connection; what it sent first (a 408) is kept in ``received``."""
    while select.select([sock], [], [], 0)[0]:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return True
        if not data:
            return True
        received[sock] = received.get(sock, b"") + data
    return False


def test_half_sent_requests_are_closed_and_the_server_keeps_answering(isolated_env: Path) -> None:
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider, "header_timeout_seconds = 1.0\nbody_timeout_seconds = 2.0")
        with _serving(isolated_env) as (process, url):
            port = int(url.rsplit(":", 1)[1])
            head = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
            body = (
                b"POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"id": "'
            )
            sockets = [_open(port, head) for _ in range(HALF_HEADS)]
            sockets += [_open(port, body) for _ in range(HALF_BODIES)]
            sockets += [_open(port, b"") for _ in range(SILENT)]
            try:
                assert httpx.get(f"{url}/v1/health", timeout=10).status_code == 200  # not starved meanwhile
                deadline = time.monotonic() + 60
                open_ones, received = list(sockets), dict[socket.socket, bytes]()
                while open_ones:
                    open_ones = [sock for sock in open_ones if not _closed_by_server(sock, received)]
                    assert time.monotonic() < deadline, f"{len(open_ones)} of {len(sockets)} half-sent requests open"
                    time.sleep(0.1)
                assert received[sockets[0]].startswith(b"HTTP/1.1 408"), received.get(sockets[0])
                assert b"header_timeout_seconds" in received[sockets[0]]
                assert received[sockets[HALF_HEADS]].startswith(b"HTTP/1.1 408")  # a half body
                assert b"body_timeout_seconds" in received[sockets[HALF_HEADS]]
                assert httpx.get(f"{url}/v1/health", timeout=10).status_code == 200
                sessions = httpx.get(f"{url}/v1/agents", timeout=10).json()["agents"]
                assert sessions == []  # no half-sent POST was taken as a request
            finally:
                for sock in sockets:
                    sock.close()
            _stop(process)


def test_a_slow_but_steady_upload_inside_the_timeouts_is_served(isolated_env: Path) -> None:
    """The timeouts bound a request's head and body, not a connection: keep-alive requests go on."""
    with FakeProviderServer(default=echo) as provider:
        _write_config(isolated_env, provider, "header_timeout_seconds = 5.0\nbody_timeout_seconds = 5.0")
        with _serving(isolated_env) as (process, url):
            port = int(url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                payload = b'{"id": "slow"}'
                sock.sendall(
                    b"POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                )
                for byte in payload:
                    sock.sendall(bytes([byte]))
                    time.sleep(0.05)
                answer = sock.recv(65536)
                assert answer.startswith(b"HTTP/1.1 201"), answer
                sock.sendall(b"GET /v1/agents/slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # the same connection
                assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            _stop(process)
