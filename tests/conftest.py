"""Shared fixtures: every test gets its own NEXUS_HOME and no provider keys from the environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_PROVIDER_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_API_KEY")


@pytest.fixture
def sql_trace() -> Callable[[Any], list[str]]:
    """``sql_trace(ledger)`` records every SQL statement a SQLite ledger's connection runs from then on, in the
    list it returns (empty at first: the COMMIT of the write that set the callback is dropped)."""

    def start(ledger: Any) -> list[str]:
        statements: list[str] = []
        ledger.database.write(lambda conn: conn.set_trace_callback(statements.append))
        statements.clear()
        return statements

    return start


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point NEXUS_HOME at a temp dir and hide real API keys, so tests never touch the user's state."""
    home = tmp_path / "nexus-home"
    monkeypatch.setenv("NEXUS_HOME", str(home))
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs("1m")`` mounts a tmpfs of that size for a real full-disk test and returns its directory.

    Skipped where mounting is not permitted (not root, no mount(8)); unmounted after the test.
    """
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root and mount(8)")
        disk = tmp_path / f"tmpfs-{len(mounted)}"
        disk.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(disk)
        return disk

    yield mount
    for disk in reversed(mounted):
        subprocess.run(["umount", str(disk)], capture_output=True, check=False)


# --------------------------------------------------------------------------- PostgreSQL

_REPO = Path(__file__).resolve().parents[1]


def _postgres_missing(why: str) -> None:
    """Skip a test that needs PostgreSQL, or fail it where CI requires it (``NEXUS_REQUIRE_POSTGRES=1``)."""
    if os.environ.get("NEXUS_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required here (NEXUS_REQUIRE_POSTGRES=1) but {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server's ``nexus`` database for the tests (a user that may create databases).

    ``NEXUS_TEST_POSTGRES_URL`` names one; otherwise a throwaway cluster is started with
    ``scripts/postgres.sh`` for the session and stopped after it.
    """
    given = os.environ.get("NEXUS_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres_missing("psycopg is not installed (pip install 'nexus-broker[postgres]')")
    import tempfile

    folder = tempfile.mkdtemp(prefix="nexus-test-pg-")  # not under pytest's root-only temp dir: initdb runs as postgres
    script = str(_REPO / "scripts" / "postgres.sh")
    started = subprocess.run(["bash", script, "start", str(folder)], capture_output=True, text=True)
    if started.returncode != 0:
        _postgres_missing(f"no PostgreSQL cluster could be started: {started.stderr.strip()}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", script, "stop", str(folder)], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> str:
    """A database with the ledger's schema, the template each test's database is copied from."""
    import psycopg

    from nexus.ledger.postgres import open_database

    name = f"nexus_template_{os.getpid()}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    open_database(_with_database(postgres_server, name)).close()
    return name


@pytest.fixture
def postgres_url(postgres_server: str, postgres_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database with the ledger's schema (``CREATE DATABASE … TEMPLATE``), dropped after."""
    import uuid

    import psycopg

    name = f"nexus_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
    yield _with_database(postgres_server, name)
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _with_database(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead of its own."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@pytest.fixture(scope="session")
def pgbouncer_server(postgres_server: str) -> Iterator[str]:
    """The test server behind a pgbouncer in transaction pooling mode (Debian's, 1.18: no prepared statements
    across transactions), as a URL with the same user; its database part is replaced per test."""
    from urllib.parse import urlsplit

    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
    if binary is None:
        _postgres_missing("pgbouncer is not installed (apt-get install pgbouncer)")
    import socket
    import tempfile

    server = urlsplit(postgres_server)
    folder = Path(tempfile.mkdtemp(prefix="nexus-test-pgbouncer-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "users.txt").write_text(f'"{server.username}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        f"[databases]\n* = host={server.hostname} port={server.port}\n[pgbouncer]\nlisten_addr = 127.0.0.1\n"
        f"listen_port = {port}\nauth_type = trust\nauth_file = {folder}/users.txt\npool_mode = transaction\n"
        "unix_socket_dir =\nmax_client_conn = 200\ndefault_pool_size = 10\n"
    )
    as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_owner:
        shutil.chown(folder, "postgres")
        for name in ("users.txt", "pgbouncer.ini"):
            shutil.chown(folder / name, "postgres")
    # its log goes to a file: a pipe nobody reads fills after some 40 test databases and pgbouncer, blocked
    # writing a log line, stops answering (connection timeouts in whichever test comes next)
    log = open(folder / "pgbouncer.log", "wb")  # noqa: SIM115  (closed after pgbouncer stops)
    bouncer = subprocess.Popen([*as_owner, binary, str(folder / "pgbouncer.ini")], stderr=log)
    try:
        import psycopg

        url = f"postgresql://{server.username}@127.0.0.1:{port}{server.path}"
        for _ in range(100):
            try:
                psycopg.connect(url, connect_timeout=2, prepare_threshold=None).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.05)
        yield url
    finally:
        bouncer.terminate()
        bouncer.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
