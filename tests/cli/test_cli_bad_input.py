"""Inputs that used to end in a traceback, each as a real ``nexus`` process (issue 8, items 7-10, 12, 13).

Each test states the promise: one clear line, the right exit code (2 bad input/config, 1 a
failed run), and nothing written when the command is refused.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import UserMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

SRC = Path(__file__).resolve().parents[2] / "src"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NEXUS_MODEL"}
    return {**env, "NEXUS_HOME": str(home), "PYTHONPATH": str(SRC), "NO_COLOR": "1", **extra}


def _nexus(
    home: Path, *args: str | bytes, stdin: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    """Run ``nexus`` with raw bytes in and out (argv items may be bytes, as a shell passes them)."""
    return subprocess.run(
        [sys.executable, "-m", "nexus.cli", *args],
        capture_output=True,
        env=_env(home, **env),
        input=stdin,
        timeout=60,
        check=False,
    )


def _err(result: subprocess.CompletedProcess[bytes]) -> str:
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    return stderr


def _write(home: Path, text_: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(text_, encoding="utf-8")


def _user_texts(home: Path, label: str = "main") -> list[str]:
    with Ledger.open(home / "agents.db") as ledger:
        return [str(m.content) for m in run_inline(ledger.turns.history(label)) if isinstance(m, UserMessage)]


# --------------------------------------------------------------------------- item 7: bytes that are not UTF-8


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_invalid_utf8_on_stdin_is_sent_with_replacement_and_said(
    home: Path, server: FakeProviderServer, locale: str
) -> None:
    server.script(text("got it"))
    result = _nexus(home, "run", "-", stdin=b"caf\xe9 au lait\n", LC_ALL=locale, PYTHONUTF8="0")
    stderr = _err(result)
    assert result.returncode == 0, stderr
    assert "1 byte that is not valid UTF-8" in stderr and "on stdin" in stderr
    assert _user_texts(home)[-1].endswith("caf\ufffd au lait")


def test_invalid_utf8_in_argv_is_sent_with_replacement(home: Path, server: FakeProviderServer) -> None:
    server.script(text("got it"))
    result = _nexus(home, "run", b"na\xefve \xff")
    stderr = _err(result)
    assert result.returncode == 0, stderr
    assert "2 bytes that are not valid UTF-8" in stderr and "command line" in stderr
    assert _user_texts(home)[-1].endswith("na\ufffdve \ufffd")


def test_invalid_utf8_session_label_is_refused_and_nothing_created(home: Path) -> None:
    result = _nexus(home, "run", "-s", b"caf\xe9", "hello")
    stderr = _err(result)
    assert result.returncode == 2 and "not valid UTF-8" in stderr
    assert not (home / "agents.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["agents", "add", "w1", "--session", b"s\xe9"],
        ["agents", "show", b"w\xe9"],
        ["agents", "rm", b"w\xe9"],
        ["queue", "list", b"w\xe9"],
        ["queue", "clear", b"w\xe9"],
        ["send", "w1", "hi", "--id", b"m\xe9"],
        ["sessions", "fork", b"t\xe9"],
        ["send", "w1", "hi", "--session", b"\xff\xfe"],
        ["agents", "add", "w1", "--model", b"openai/\xff"],
        ["agents", "add", "w1", "--tools", b"re\xe9d"],
    ],
    ids=[
        "agents-add-session",
        "agents-show",
        "agents-rm",
        "queue-list",
        "queue-clear",
        "send-id",
        "fork-turn",
        "send-session",
        "agents-add-model",
        "agents-add-tools",
    ],
)
def test_invalid_utf8_in_any_name_is_refused_not_a_traceback(home: Path, args: list[str | bytes]) -> None:
    result = _nexus(home, *args)
    stderr = _err(result)
    assert result.returncode == 2, stderr
    assert "not valid UTF-8" in stderr and "Traceback" not in stderr


def test_invalid_utf8_line_in_chat_is_sent_with_replacement(home: Path, server: FakeProviderServer) -> None:
    server.script(text("ok"))
    result = _nexus(home, "chat", stdin=b"hello \xe9\n/exit\n")
    stderr = _err(result)
    assert result.returncode == 0, stderr
    assert "not valid UTF-8" in stderr
    assert _user_texts(home)[-1].endswith("hello \ufffd")


@pytest.mark.parametrize("command", [("sessions", "list"), ("agents", "list"), ("queue", "list")])
def test_a_home_that_is_a_file_is_a_config_error_for_reads_too(tmp_path: Path, command: tuple[str, ...]) -> None:
    """``NEXUS_HOME`` naming a regular file: ``nexus run`` refused it, the read commands said "no sessions
    yet" / "no agents yet" with exit 0."""
    afile = tmp_path / "home-file"
    afile.write_text("not a directory\n")
    result = _nexus(tmp_path / "unused", *command, NEXUS_HOME=str(afile))
    stderr = _err(result)
    assert result.returncode == 2 and not result.stdout, stderr
    assert f"the ledger: {afile / 'agents.db'} cannot be created: {afile} is not a directory" in stderr
    assert afile.read_text() == "not a directory\n"


# --------------------------------------------------------------------------- item 8: a workspace that is a file


@pytest.mark.parametrize("below", [False, True])
def test_workspace_that_is_a_file_is_a_config_error(home: Path, tmp_path: Path, below: bool) -> None:
    afile = tmp_path / "passwd"
    afile.write_text("root:x:0:0\n")
    workspace = afile / "sub" if below else afile
    config = (home / "nexus.toml").read_text()
    (home / "nexus.toml").write_text(f'workspace = "{workspace}"\n{config}')
    result = _nexus(home, "run", "hello")
    stderr = _err(result)
    assert result.returncode == 2, stderr
    assert f"nexus.toml:1: workspace: {workspace}" in stderr and f"{afile} is not a directory (it is a file)" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (home / "agents.db").exists()


def test_read_only_workspace_runs_without_a_starter_file(
    home: Path, tmp_path: Path, server: FakeProviderServer
) -> None:
    # a workspace nexus may not write to (chattr +i stops root too) is usable: the starter AGENTS.md is skipped
    workspace = tmp_path / "readonly-ws"
    workspace.mkdir()
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(workspace)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not permitted here: {made.stderr.decode().strip()}")
    try:
        config = (home / "nexus.toml").read_text()
        (home / "nexus.toml").write_text(f'workspace = "{workspace}"\n{config}')
        server.script(text("fine"))
        result = _nexus(home, "run", "hello")
    finally:
        subprocess.run(["chattr", "-i", str(workspace)], capture_output=True, check=False)
    stderr = _err(result)
    assert result.returncode == 0, stderr
    assert result.stdout.decode().strip() == "fine"
    assert list(workspace.iterdir()) == []


# --------------------------------------------------------------------------- item 9: absurd nesting


@pytest.mark.parametrize("command", [["run", "hello"], ["doctor"]])
def test_deeply_nested_value_is_a_config_error(isolated_env: Path, command: list[str]) -> None:
    _write(isolated_env, 'default_model = "openai/gpt-4o-mini"\n' + "a = " + "[" * 5000 + "]" * 5000 + "\n")
    result = _nexus(isolated_env, *command)
    stderr = _err(result)
    output = stderr + result.stdout.decode()
    assert result.returncode == 2, output
    assert "nexus.toml:2: a value nests arrays or tables more than 32 levels deep" in output
    assert "RecursionError" not in output


# --------------------------------------------------------------------------- item 10: a database nexus cannot write


@pytest.fixture(params=["file", "directory"])
def immutable_db(home: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """``agents.db`` (or the directory holding it) made immutable with ``chattr +i``, which stops root too.

    Skipped where that is impossible (no chattr, a filesystem without the attribute, no privilege).
    """
    database = home / "agents.db"
    with Ledger.open(database) as ledger:
        run_inline(ledger.sessions.create(NewSession("main")))
    target = database if request.param == "file" else home
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(target)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not permitted here: {made.stderr.decode().strip()}")
    try:
        yield database
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=False)


def test_read_only_database_is_one_line_for_run_and_a_failure_for_doctor(
    home: Path, server: FakeProviderServer, immutable_db: Path
) -> None:
    server.script(text("never sent"))
    result = _nexus(home, "run", "hello")
    stderr = _err(result)
    assert result.returncode == 1, stderr
    assert stderr.startswith("nexus: error: cannot write the ledger:") and "not writable" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert server.requests == []
    doctor = _nexus(home, "doctor")
    report = doctor.stdout.decode()
    assert doctor.returncode == 1, report
    assert "[fail] database" in report and "not writable" in report
    with sqlite3.connect(f"file:{immutable_db}?immutable=1", uri=True) as conn:  # nothing was written
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 0


def test_a_ledger_that_is_not_a_database_gets_the_same_advice_from_every_command(
    home: Path, server: FakeProviderServer
) -> None:
    """A file of random bytes was told to be made writable (``lsattr``, the mount) by ``run`` and ``doctor``
    while ``sessions list`` said to move it aside: it is writable, it is not a database."""
    database = home / "agents.db"
    database.write_bytes(os.urandom(100_000))
    before = database.read_bytes()
    server.script(text("never sent"))
    ran, doctor, listed = _nexus(home, "run", "hello"), _nexus(home, "doctor"), _nexus(home, "sessions", "list")
    for result in (ran, listed):
        assert result.returncode == 1, _err(result)
        assert "move it aside" in _err(result) and "lsattr" not in _err(result), _err(result)
    report = doctor.stdout.decode()
    assert doctor.returncode == 1 and "[fail] database" in report, report
    assert "move it aside" in report and "lsattr" not in report, report
    assert server.requests == [] and database.read_bytes() == before


# --------------------------------------------------------------------------- item 12: ${VAR} left unset


def test_unset_variable_in_api_key_is_a_config_error_not_the_environment_key(
    isolated_env: Path, server: FakeProviderServer
) -> None:
    _write(
        isolated_env,
        'default_model = "openai/gpt-4o-mini"\n\n[providers.openai]\n'
        f'base_url = "{server.openai_base_url}"\napi_key = "${{NEXUS_TEST_UNSET_KEY}}"\n',
    )
    server.script(text("must not be reached"))
    result = _nexus(isolated_env, "run", "hello", OPENAI_API_KEY="sk-from-the-environment")
    stderr = _err(result)
    assert result.returncode == 2, stderr
    assert "nexus.toml:5: providers.openai.api_key uses ${NEXUS_TEST_UNSET_KEY}" in stderr
    assert "NEXUS_TEST_UNSET_KEY:-default" in stderr
    assert server.requests == [] and not (isolated_env / "agents.db").exists()
    doctor = _nexus(isolated_env, "doctor", OPENAI_API_KEY="sk-from-the-environment")
    assert doctor.returncode == 1 and "NEXUS_TEST_UNSET_KEY" in doctor.stdout.decode()


@pytest.mark.parametrize("command", [["run", "hello"], ["doctor"]])
def test_empty_api_key_is_a_config_error_not_a_traceback(
    isolated_env: Path, server: FakeProviderServer, command: list[str]
) -> None:
    _write(
        isolated_env,
        'default_model = "openai/gpt-4o-mini"\n\n[providers.openai]\n'
        f'base_url = "{server.openai_base_url}"\napi_key = ""\n',
    )
    result = _nexus(isolated_env, *command, OPENAI_API_KEY="sk-from-the-environment")
    output = _err(result) + result.stdout.decode()
    assert result.returncode == 2, output
    assert "nexus.toml:5: providers.openai.api_key" in output
    assert server.requests == [] and not (isolated_env / "agents.db").exists()


def test_variable_default_is_used_when_unset(isolated_env: Path, server: FakeProviderServer) -> None:
    _write(
        isolated_env,
        'default_model = "fake/m"\n\n[providers.fake]\n'
        f'base_url = "${{NEXUS_TEST_UNSET_URL:-{server.openai_base_url}}}"\n'
        'api_key = "${NEXUS_TEST_UNSET_KEY:-key-from-the-default}"\n',
    )
    server.script(text("hi"))
    result = _nexus(isolated_env, "run", "hello")
    assert result.returncode == 0, _err(result)
    assert server.last_request.headers.get("authorization") == "Bearer key-from-the-default"


# --------------------------------------------------------------------------- item 13: base_url that is no URL


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "not a url"])
def test_base_url_that_is_not_http_is_refused_at_load(isolated_env: Path, url: str) -> None:
    _write(isolated_env, f'default_model = "x/m"\n\n[providers.x]\nbase_url = "{url}"\napi_key = "k"\n')
    for command in (["run", "hello"], ["doctor"]):
        result = _nexus(isolated_env, *command)
        output = _err(result) + result.stdout.decode()
        assert result.returncode == 2, output
        assert "nexus.toml:4: providers.x.base_url" in output and "http:// or https://" in output
    assert not (isolated_env / "agents.db").exists()


# --------------------------------------------------------------------------- a stranger's trial (2026-11-28)


@pytest.mark.parametrize("label", ["", "   "])
def test_an_empty_session_label_is_refused_not_taken_for_main(home: Path, label: str) -> None:
    """``-s ""`` used to run in ``main`` (an empty string read as "no -s"); ``-s "   "`` was refused already."""
    result = _nexus(home, "run", "-s", label, "hello")
    stderr = _err(result)
    assert result.returncode == 2 and "the session label is empty" in stderr, stderr
    assert not (home / "agents.db").exists()


def test_a_session_label_with_edge_spaces_is_refused_not_trimmed(home: Path, server: FakeProviderServer) -> None:
    """``run -s " lead"`` ran in ``lead`` (the label trimmed) where ``fork --label " x"`` refuses it; and a session an
    older version made as `` lead`` could not be named at all. Now a new one is refused, an existing one used."""
    result = _nexus(home, "run", "-s", " lead", "hello")
    stderr = _err(result)
    assert result.returncode == 2 and "cannot start or end with spaces" in stderr, stderr
    assert not (home / "agents.db").exists()
    with Ledger.open(home / "agents.db") as ledger:  # as an older version let it be made
        run_inline(ledger.sessions.create(NewSession(" lead")))
    server.script(text("in the older session"))
    ran = _nexus(home, "run", "-s", " lead", "hello")
    assert ran.returncode == 0, _err(ran)
    with Ledger.open(home / "agents.db") as ledger:
        labels = {session.label for session in run_inline(ledger.sessions.list())}
        assert labels == {" lead"} and run_inline(ledger.sessions.get(" lead")).head_turn_id is not None


@pytest.mark.parametrize("argv", [["--bogusflag"], ["--config", "x.toml", "--nope", "run", "hi"], ["--bogus=1"]])
def test_an_unknown_option_before_the_command_is_named(home: Path, argv: list[str]) -> None:
    """argparse said "the following arguments are required: COMMAND" for ``nexus --bogusflag``."""
    result = _nexus(home, *argv)
    stderr = _err(result)
    unknown = next(a for a in argv if a.startswith("--") and a != "--config")
    assert result.returncode == 2 and f"unknown option {unknown!r}" in stderr, stderr
    assert "required: COMMAND" not in stderr and not (home / "agents.db").exists()
