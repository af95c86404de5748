"""server.json: trusted only while its process lives and holds the broker lock; 0600; withdrawn by its owner."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nexus.broker.host import broker_lock
from nexus.config import load_config
from nexus.errors import ConfigError, NexusError, UsageError
from nexus.server.client import call_server
from nexus.server.discovery import RunningServer, find_server, remove_server_file, server_file, write_server_file


def test_a_stale_or_garbled_server_file_is_ignored(isolated_env: Path) -> None:
    config = load_config()
    isolated_env.mkdir(parents=True, exist_ok=True)
    path = write_server_file(config, "0.0.0.0", 8123)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path == server_file(config)
    assert find_server(config) is None  # this process is alive but holds no broker lock
    with broker_lock(config) as held:
        assert held
        found = find_server(config)
        assert found is not None and found.url == "http://127.0.0.1:8123" and found.pid == os.getpid()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    path.write_text(json.dumps({"pid": int(dead.stdout), "host": "127.0.0.1", "port": 1}))
    with broker_lock(config):
        assert find_server(config) is None  # its process is gone
        for garbage in ("{", "[]", '{"pid": "x"}', ""):
            path.write_text(garbage)
            assert find_server(config) is None
    write_server_file(config, "127.0.0.1", 1)
    remove_server_file(config)
    assert not path.exists()


def test_a_server_refusal_is_an_error_of_the_request_not_of_the_configuration() -> None:
    """`nexus send` to a full `new` queue printed `nexus: config error: nexus serve refused it (400)` (a trial)."""
    answers = {"/full": (400, {"error": {"message": "the queue is full"}}), "/broken": (500, {"error": {}})}

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            status, body = answers[self.path]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Answer) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        server = RunningServer(os.getpid(), f"http://127.0.0.1:{httpd.server_address[1]}", None)
        with pytest.raises(UsageError, match=r"refused it \(400\): the queue is full"):
            call_server(server, "POST", "/full", {})
        with pytest.raises(NexusError) as failed:
            call_server(server, "POST", "/broken", {})
        assert not isinstance(failed.value, ConfigError)
        httpd.shutdown()
