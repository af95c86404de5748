"""The ``nexus`` command run as a real subprocess: help, version, exit codes, config errors, doctor, models."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus import __version__
from nexus.config import bundled_smollm2_weights
from nexus.ledger import NewSession
from nexus.ledger._sql_db import run_inline

RunNexus = Callable[..., subprocess.CompletedProcess[str]]

SRC = Path(__file__).resolve().parents[2] / "src"
HAS_LOCAL = importlib.util.find_spec("llama_cpp") is not None and bundled_smollm2_weights() is not None


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "nexus.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_help_lists_every_command(nexus: RunNexus) -> None:
    result = nexus("--help")
    assert result.returncode == 0
    for command in ("run", "chat", "sessions", "doctor", "models"):
        assert f"    {command}" in result.stdout
    assert "exit codes" in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--help"],
        ["chat", "--help"],
        ["sessions", "--help"],
        ["sessions", "list", "--help"],
        ["sessions", "show", "--help"],
        ["sessions", "history", "--help"],
        ["sessions", "fork", "--help"],
        ["sessions", "export", "--help"],
        ["sessions", "import", "--help"],
        ["doctor", "--help"],
        ["models", "--help"],
    ],
)
def test_every_command_has_help(nexus: RunNexus, argv: list[str]) -> None:
    result = nexus(*argv)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: nexus")
    assert len(result.stdout.splitlines()) > 4


def test_run_help_documents_its_options(nexus: RunNexus) -> None:
    out = nexus("run", "--help").stdout
    for option in ("--session", "--model", "--thinking", "--json", "MESSAGE", "stdin"):
        assert option in out


def test_version(nexus: RunNexus) -> None:
    result = nexus("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"nexus {__version__}"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([], "required: COMMAND"),
        (["frobnicate"], "invalid choice"),
        (["run"], "MESSAGE"),
        (["run", "--thinking", "extreme", "hi"], "invalid choice"),
        (["sessions"], "required: ACTION"),
        (["sessions", "fork"], "TURN_ID"),
        (["models", "--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_arguments_exit_2(nexus: RunNexus, argv: list[str], complaint: str) -> None:
    result = nexus(*argv)
    assert result.returncode == 2
    assert "usage: nexus" in result.stderr
    assert complaint in result.stderr


def test_help_imports_nothing_heavy(nexus: RunNexus) -> None:
    code = (
        "import sys\n"
        "from nexus.cli import main\n"
        "assert main(['--help']) == 0\n"
        "assert main(['db', '--help']) == 0\n"
        "heavy = ['httpx', 'pydantic', 'sqlite3', 'llama_cpp', 'nexus.config._schema', 'nexus.llm', 'psycopg']\n"
        "heavy += ['mcp', 'nexus.mcp']\n"
        "print('LOADED', [name for name in heavy if name in sys.modules])\n"
        "import nexus.ledger, nexus.ledger.postgres\n"
        "print('PSYCOPG', 'psycopg' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=True,
    )
    assert "LOADED []" in result.stdout
    assert "PSYCOPG False" in result.stdout  # the PostgreSQL backend loads its driver when it connects


def test_invalid_config_exits_2_naming_key_and_line(nexus: RunNexus, isolated_env: Path) -> None:
    path = write_config(isolated_env, 'default_model = "openai/gpt-4o-mini"\n[agent]\nmax_iterations = "many"\n')
    result = nexus("sessions", "list")
    assert result.returncode == 2
    assert f"{path}:3: agent.max_iterations" in result.stderr
    assert "fix:" in result.stderr
    assert "Traceback" not in result.stderr


def test_toml_syntax_error_exits_2(nexus: RunNexus, isolated_env: Path) -> None:
    path = write_config(isolated_env, "[agent\n")
    assert nexus("models").returncode == 0  # a command that never reads the config is not blocked by it
    result = nexus("sessions", "list")
    assert result.returncode == 2
    assert f"{path}:1: TOML syntax error" in result.stderr


def test_explicit_missing_config_file(nexus: RunNexus, tmp_path: Path) -> None:
    result = nexus("--config", str(tmp_path / "missing.toml"), "sessions", "list")
    assert result.returncode == 2
    assert "not found" in result.stderr


def test_missing_file_named_by_nexus_config_is_an_error_like_config(
    nexus: RunNexus, isolated_env: Path, tmp_path: Path
) -> None:
    # $NEXUS_CONFIG and --config "do the same" (docs/configuration.md): a typo in either ran on the defaults,
    # against whatever provider the environment offers, instead of the file the user meant.
    missing = tmp_path / "typo.toml"
    for args in (("run", "hi"), ("sessions", "list"), ("adapters", "register", "c", "--builtin", "console")):
        result = nexus(*args, env={"NEXUS_CONFIG": str(missing)})
        assert result.returncode == 2, (args, result.stderr)
        assert f"config file {missing} (named by $NEXUS_CONFIG) not found" in result.stderr
        assert "Traceback" not in result.stderr
    assert not missing.exists(), "an editing command does not create a file named by mistake, as with --config"
    assert not (isolated_env / "agents.db").exists(), "nothing ran"
    write_config(isolated_env, "")
    assert nexus("sessions", "list", env={"NEXUS_CONFIG": ""}).returncode == 0  # set but empty: the default file


def test_doctor_without_anything(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("doctor")
    assert "[ok  ] config" in result.stdout and "not found: using defaults" in result.stdout
    assert f"{isolated_env / 'agents.db'} does not exist yet" in result.stdout
    assert f"{isolated_env / 'workspace'} does not exist yet" in result.stdout
    if HAS_LOCAL:
        assert result.returncode == 0
        assert "local/smollm2-135m-instruct" in result.stdout
    else:
        assert result.returncode == 1
        assert "pip install 'nexus-broker[local]'" in result.stdout


def test_doctor_reports_keys_without_printing_them(nexus: RunNexus, isolated_env: Path) -> None:
    write_config(
        isolated_env,
        '[[providers.acme.auth_profiles]]\nname = "one"\napi_key = "${ACME_ONE}"\n'
        '[[providers.acme.auth_profiles]]\nname = "two"\napi_key = "${ACME_TWO}"\n',
    )
    secret = "sk-test-very-secret-value"
    keys = {"OPENAI_API_KEY": secret, "ACME_ONE": "another-secret", "ACME_TWO": "third-secret"}
    result = nexus("doctor", env=keys)
    for value in keys.values():
        assert value not in result.stdout + result.stderr
    assert "OPENAI_API_KEY set" in result.stdout
    assert "one: set" in result.stdout and "two: set" in result.stdout
    # a profile whose variable is unset is a configuration error, not a profile silently skipped
    result = nexus("doctor", env={**keys, "ACME_TWO": ""})
    assert "another-secret" not in result.stdout + result.stderr
    assert result.returncode == 1
    assert "[fail] provider" in result.stdout and "auth_profiles[1] uses ${ACME_TWO}" in result.stdout


def test_doctor_passes_a_keyless_provider_on_this_machine_as_a_run_does(nexus: RunNexus, isolated_env: Path) -> None:
    # nexus run calls a server on 127.0.0.1 without a key; the doctor failed the model ("no key for 'box'")
    write_config(
        isolated_env,
        'default_model = "box/m"\n[providers.box]\nbase_url = "http://127.0.0.1:9/v1"\napi = "openai-completions"\n',
    )
    result = nexus("doctor")
    assert "[ok  ] model      box/m" in result.stdout and "no key for" not in result.stdout
    assert "[ok  ] provider   box (openai-completions at http://127.0.0.1:9/v1): no key needed" in result.stdout
    write_config(isolated_env, 'default_model = "box/m"\n[providers.box]\nbase_url = "https://box.example/v1"\n')
    assert "[fail] model      box/m" in nexus("doctor").stdout  # a remote server still needs its key


def test_doctor_invalid_config_exits_2(nexus: RunNexus, isolated_env: Path) -> None:
    write_config(isolated_env, "[agent]\nmax_retrys = 2\n")
    result = nexus("doctor")
    assert result.returncode == 2
    assert "nexus.toml:2: agent.max_retrys" in result.stdout
    assert "did you mean 'max_retries'" in result.stdout


def test_doctor_finds_a_bad_workspace_and_a_good_database(nexus: RunNexus, isolated_env: Path) -> None:
    from nexus.ledger import Ledger

    isolated_env.mkdir(parents=True)
    (isolated_env / "workspace").write_text("not a directory")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("demo")))
    result = nexus("doctor", env={"OPENAI_API_KEY": "k"})
    assert result.returncode == 1
    assert "[fail] workspace" in result.stdout and "is not a directory" in result.stdout
    assert "agents.db opens and is writable (1 session)" in result.stdout


def test_doctor_flags_default_model_without_key(nexus: RunNexus, isolated_env: Path) -> None:
    write_config(isolated_env, 'default_model = "anthropic/claude-sonnet-4-5"\n')
    result = nexus("doctor")
    assert result.returncode == 1
    assert "[fail] model" in result.stdout and "ANTHROPIC_API_KEY" in result.stdout


def test_models_lists_the_catalog(nexus: RunNexus) -> None:
    result = nexus("models")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["MODEL", "CONTEXT", "MAX"]
    assert any(line.startswith("local/smollm2-135m-instruct") for line in lines)
    assert any(line.startswith("openai/") for line in lines)
    data = json.loads(nexus("models", "--json", "-p", "local").stdout)
    assert [(m["provider"], m["id"], m["context_window"]) for m in data] == [("local", "smollm2-135m-instruct", 4096)]


def test_models_unknown_provider_is_a_clean_error(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("models", "-p", "no-such-provider")
    assert result.returncode == 2, "a wrong argument (docs/cli.md's exit codes): it was 1"
    assert result.stderr.startswith("nexus: error: -p: no models for provider 'no-such-provider'")
    assert "Traceback" not in result.stderr
    # a provider nexus.toml configures is no wrong argument: the catalog just lists none of its models
    write_config(isolated_env, '[providers.mine]\nbase_url = "http://127.0.0.1:9/v1"\napi = "openai-completions"\n')
    for args in (("models", "-p", "mine"), ("models", "-p", "mine", "--json")):
        mine = nexus(*args)
        assert mine.returncode == 0, mine.stderr
        assert "which nexus.toml configures" in mine.stderr and "-m mine/MODEL_ID" in mine.stderr
        assert mine.stdout == ("[]\n" if "--json" in args else "")


def test_run_help_gives_the_whole_model_choice_order(nexus: RunNexus) -> None:
    result = nexus("run", "--help")
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    order = ["NEXUS_MODEL", "default_model", "first provider with a key", "local model"]
    positions = [flat.index(step) for step in order]
    assert positions == sorted(positions), flat
