"""Errors a new user hits first: each is one clean line (or block), the right exit code, nothing written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus.ledger import Ledger, NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, UserMessage

RunNexus = Callable[..., subprocess.CompletedProcess[str]]


def _write(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(text, encoding="utf-8")


def _clean(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "StreamOptions" not in result.stderr, result.stderr
    assert "Ledger." not in result.stderr and "Error: " not in result.stderr.replace("nexus: error", ""), result.stderr


def test_missing_api_key_exits_2_at_once_and_writes_nothing(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("run", "-m", "openai/gpt-4o-mini", "hello")
    assert result.returncode == 2, result.stderr
    assert "OPENAI_API_KEY" in result.stderr and "[providers.openai]" in result.stderr
    assert "session:" not in result.stderr and "retry" not in result.stderr.lower()
    _clean(result)
    assert not (isolated_env / "agents.db").exists()


def test_missing_key_in_json_mode_is_reported_in_band(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("run", "--json", "-m", "anthropic/claude-sonnet-4-5", "hello")
    assert result.returncode == 2
    event = json.loads(result.stdout.splitlines()[0])
    assert event["type"] == "stream_error" and "ANTHROPIC_API_KEY" in event["error"]


@pytest.mark.parametrize("via_config", [False, True])
def test_unknown_provider_exits_2_listing_known_ones(nexus: RunNexus, isolated_env: Path, via_config: bool) -> None:
    if via_config:
        _write(isolated_env, 'default_model = "foo/bar"\n')
    result = nexus("run", *([] if via_config else ["-m", "foo/bar"]), "hello")
    assert result.returncode == 2, result.stderr
    assert "unknown provider 'foo'" in result.stderr and "anthropic" in result.stderr
    assert "[providers.foo]" in result.stderr and "base_url" in result.stderr
    assert "UnknownProviderError" not in result.stderr
    _clean(result)
    assert not (isolated_env / "agents.db").exists()


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('default_model = "foo/bar"\n', "nexus.toml:1: default_model: unknown provider 'foo'"),
        ('fallbacks = ["foo/bar"]\n', "nexus.toml:1: fallbacks[0]: unknown provider 'foo'"),
        ('\nfallbacks = [\n  "openai/gpt-4o",\n  "foo/bar",\n]\n', "toml:2: fallbacks[1]: unknown provider 'foo'"),
    ],
)
def test_an_unknown_provider_in_the_config_names_its_key_and_line(
    nexus: RunNexus, isolated_env: Path, toml: str, named: str
) -> None:
    """Like every other config mistake: the file, the line and the dotted key to fix (a stranger's trial)."""
    _write(isolated_env, toml)
    result = nexus("run", "hello")
    assert result.returncode == 2, result.stderr
    assert named in result.stderr, result.stderr
    assert not (isolated_env / "agents.db").exists()


def test_unknown_local_model_exits_2(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("run", "-m", "local/nonexistent", "hi")
    assert result.returncode == 2
    assert "unknown local model 'nonexistent'" in result.stderr and "local.model_path" not in result.stderr
    assert "model_path" in result.stderr
    assert not (isolated_env / "agents.db").exists()


def test_bad_wire_api_and_tool_names_fail_at_load(nexus: RunNexus, isolated_env: Path) -> None:
    _write(isolated_env, '[providers.foo]\nbase_url = "http://127.0.0.1:9/v1"\napi = "grpc"\n')
    result = nexus("run", "-m", "foo/x", "hi")
    assert result.returncode == 2 and "nexus.toml:3: providers.foo.api" in result.stderr
    doctor = nexus("doctor")
    assert doctor.returncode != 0 and "grpc" in doctor.stdout + doctor.stderr
    _write(isolated_env, '[tools]\ndeny = ["bsh"]\n')
    result = nexus("run", "hi")
    assert result.returncode == 2 and "did you mean 'bash'" in result.stderr
    assert not (isolated_env / "agents.db").exists()


def test_unknown_session_speaks_cli_not_python(nexus: RunNexus, isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    with Ledger.open(isolated_env / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("demo")))
    result = nexus("sessions", "show", "nosuch")
    assert result.returncode == 2  # as an unknown agent: a name that names nothing
    assert "no session or alias named 'nosuch'" in result.stderr and "nexus sessions list" in result.stderr
    _clean(result)


def test_the_unknown_session_hint_is_a_command_that_works_and_never_a_raw_escape(
    nexus: RunNexus, isolated_env: Path
) -> None:
    """The hint printed the label raw: `nexus run -s my label "message"` (wrong shell), and an ESC byte from the
    argument went to the terminal (the first mention was escaped, the hint was not)."""
    isolated_env.mkdir(parents=True, exist_ok=True)
    with Ledger.open(isolated_env / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("demo")))
    spaced = nexus("sessions", "show", "my label")
    assert spaced.returncode == 2 and "`nexus run -s 'my label' \"message\"`" in spaced.stderr, spaced.stderr
    coloured = nexus("sessions", "show", "\x1b[31mred")
    assert coloured.returncode == 2 and "\x1b" not in coloured.stderr, coloured.stderr
    assert "nexus run -s" not in coloured.stderr  # run refuses such a label: no hint to a command that fails


def _seed(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("main")))
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "main",
                    None,
                    query_messages=[UserMessage("hi")],
                    response_messages=[AssistantMessage(content=[TextContent("hello")], provider="openai", model="m")],
                    details=TurnDetails(model="m", provider="openai"),
                )
            )
        )


def test_export_to_a_missing_directory_is_one_line(nexus: RunNexus, isolated_env: Path, tmp_path: Path) -> None:
    _seed(isolated_env)
    target = tmp_path / "nonexistent" / "dir" / "x.jsonl"
    result = nexus("sessions", "export", "main", "-o", str(target))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and str(target) in result.stderr and "does not exist" in result.stderr
    _clean(result)
    assert not target.parent.exists()


def test_export_to_a_directory_leaves_nothing_behind(nexus: RunNexus, isolated_env: Path, tmp_path: Path) -> None:
    _seed(isolated_env)
    out = tmp_path / "out"
    target = out / "ro"
    target.mkdir(parents=True)
    result = nexus("sessions", "export", "main", "-o", str(target))
    assert result.returncode == 1
    assert "is a directory" in result.stderr and str(target) in result.stderr
    _clean(result)
    assert sorted(p.name for p in out.iterdir()) == ["ro"] and list(target.iterdir()) == []


def test_export_to_an_unwritable_directory_leaves_nothing_behind(
    nexus: RunNexus, isolated_env: Path, tmp_path: Path
) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root can write anywhere")
    _seed(isolated_env)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = nexus("sessions", "export", "main", "-o", str(locked / "x.jsonl"))
        assert result.returncode == 1 and "Permission denied" in result.stderr
        _clean(result)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_export_to_a_file_still_works(nexus: RunNexus, isolated_env: Path, tmp_path: Path) -> None:
    _seed(isolated_env)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "main.jsonl"
    result = nexus("sessions", "export", "main", "-o", str(target))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "session" and any("hello" in json.dumps(line) for line in lines)
    assert sorted(p.name for p in out.iterdir()) == ["main.jsonl"]


def test_fallback_without_a_key_is_reported_in_cli_terms(nexus: RunNexus, isolated_env: Path) -> None:
    from nexus.testing import FakeProviderServer
    from nexus.testing.steps import http_error

    with FakeProviderServer() as server:
        _write(
            isolated_env,
            'default_model = "fake/m"\nfallbacks = ["openai/gpt-4o-mini"]\n[agent]\nmax_retries = 0\n'
            f'[providers.fake]\napi = "openai-completions"\nbase_url = "{server.openai_base_url}"\napi_key = "t"\n',
        )
        server.script(http_error(503, "overloaded"))
        result = nexus("run", "hi")
    assert result.returncode == 1
    assert "OPENAI_API_KEY" in result.stderr and '[providers.openai] api_key = "…"' in result.stderr, result.stderr
    _clean(result)


def test_doctor_shows_a_base_url_without_the_credential_it_carries(nexus: RunNexus, isolated_env: Path) -> None:
    """Some gateways take the key in the URL (``?key=``, ``user:password@``): the doctor names the URL, not the key."""
    _write(
        isolated_env,
        '[providers.gw]\napi = "openai-completions"\napi_key = "k"\n'
        'base_url = "https://ada:pw-0123456789@gw.example/v1?key=urlkey0123456789abc&region=eu"\n',
    )
    result = nexus("doctor")
    assert "gw.example/v1" in result.stdout and "region=eu" in result.stdout, result.stdout
    for secret in ("urlkey0123456789abc", "pw-0123456789"):
        assert secret not in result.stdout + result.stderr
