"""A ledger location that is neither a file path nor a PostgreSQL URL is refused (exit 2), not made a file.

Before, anything but ``postgresql://`` became a path: ``mysql://u@h/db``, ``sqlite:///x.db`` or a
``postgresql:/`` missing a slash made a new SQLite ledger in a directory named after the scheme (under the
current directory or ``$NEXUS_HOME``), and ``nexus serve`` ran a whole deployment on it without a word.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .cli_process import RunNexus

TYPOS = {
    "mysql://app:pw-123@db.internal/agents": "is a mysql URL",
    "sqlite:///tmp/agents.db": "is a sqlite URL",
    "postgresql:/app:pw-123@127.0.0.1:5432/agents": "needs '://'",
    "postgres:app@127.0.0.1/agents": "needs '://'",
}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The command's current directory: a refused location must leave nothing in it."""
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _files(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots if root.exists() for p in root.rglob("*"))


@pytest.mark.parametrize("url", sorted(TYPOS))
def test_a_mistyped_database_url_in_the_environment_is_exit_2_and_writes_nothing(
    url: str, nexus: RunNexus, isolated_env: Path, work: Path
) -> None:
    for args in (("sessions", "list"), ("agents", "add", "zed"), ("queue", "list")):
        result = nexus(*args, env={"NEXUS_DATABASE_URL": url})
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "NEXUS_DATABASE_URL" in result.stderr and TYPOS[url] in result.stderr, result.stderr
        assert "pw-123" not in result.stderr and "Traceback" not in result.stderr
    assert _files(work) == [] and not (isolated_env / "agents.db").exists()
    assert not any("mysql:" in f or "sqlite:" in f or "postgres" in f for f in _files(isolated_env))


def test_a_mistyped_database_in_nexus_toml_names_the_file_and_line(nexus: RunNexus, isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('default_model = "local/smollm2"\ndatabase = "mongodb://zz@host/dbq"\n')
    for args in (("sessions", "list"), ("doctor",)):
        result = nexus(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "nexus.toml" in result.stderr and "is a mongodb URL" in result.stderr, result.stderr
    assert not any("mongodb" in f for f in _files(isolated_env))


def test_a_file_path_with_a_colon_is_still_a_path(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("agents", "add", "zed", env={"NEXUS_DATABASE_URL": str(isolated_env / "v2:agents.db")})
    assert result.returncode == 0, result.stderr
    assert os.path.exists(isolated_env / "v2:agents.db")


@pytest.mark.parametrize("url", sorted(TYPOS))
def test_nexus_db_refuses_a_mistyped_url_as_source_target_or_database(
    url: str, nexus: RunNexus, isolated_env: Path, work: Path
) -> None:
    assert nexus("agents", "add", "zed").returncode == 0
    ledger = str(isolated_env / "agents.db")
    for args in (("db", "copy", ledger, url), ("db", "copy", url, "copy.db"), ("db", "migrate", "--database", url)):
        result = nexus(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "is not a ledger" in result.stderr or "needs '://'" in result.stderr, result.stderr
        assert "pw-123" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert _files(work) == []
