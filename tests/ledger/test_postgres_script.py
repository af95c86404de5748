"""``scripts/postgres.sh``: a cluster stopped and started again keeps its URL.

A user exports ``NEXUS_DATABASE_URL`` from ``start`` and points servers at it; a ``stop`` + ``start`` that
picked a new free port left all of them on a dead port for good. The port changes only when another
program took it meanwhile, and the script says so.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = str(Path(__file__).resolve().parents[2] / "scripts" / "postgres.sh")


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def cluster_dir() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="nexus-test-pgscript-")  # initdb runs as postgres: not pytest's tmp
    yield folder
    _script("stop", folder)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_restarted_cluster_keeps_its_url_until_its_port_is_taken(cluster_dir: str) -> None:
    first = _script("start", cluster_dir)
    if first.returncode != 0:
        why = f"no PostgreSQL cluster could be started: {first.stderr.strip()}"
        if os.environ.get("NEXUS_REQUIRE_POSTGRES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    url = first.stdout.strip()
    assert _script("stop", cluster_dir).returncode == 0
    again = _script("start", cluster_dir)
    assert again.returncode == 0 and again.stdout.strip() == url, (url, again.stdout, again.stderr)
    assert _script("url", cluster_dir).stdout.strip() == url
    assert _script("stop", cluster_dir).returncode == 0
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as squatter:
        # the stopped server's connections linger in TIME_WAIT on its port: a plain bind failed there at load 20
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        moved = _script("start", cluster_dir)
    assert moved.returncode == 0 and moved.stdout.strip() != url
    assert f"port {port} is taken now; the cluster moves to" in moved.stderr
