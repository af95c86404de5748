"""``nexus adapters``: real CLI subprocesses editing a real nexus.toml and running real adapters."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nexus.testing import FakeTelegram

from .cli_process import RunNexus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "adapters"


def test_register_enable_test_list_disable(nexus: RunNexus, isolated_env: Path, tmp_path: Path) -> None:
    out = tmp_path / "deliveries.jsonl"
    config = isolated_env / "nexus.toml"
    isolated_env.mkdir(parents=True, exist_ok=True)
    config.write_text('# my settings\ndefault_model = "openai/gpt-4o-mini"\n')

    registered = nexus("adapters", "register", "files", "--builtin", "jsonl")
    assert registered.returncode == 0, registered.stderr
    assert "supports send, stream, health" in registered.stdout
    enabled = nexus("adapters", "enable", "files/a", "--set", f"path={out}", "--agent", "helper")
    assert enabled.returncode == 0, enabled.stderr
    text = config.read_text()
    assert text.startswith("# my settings\n"), "comments are kept"
    assert "[adapters.files.accounts.a]" in text and 'agent = "helper"' in text

    sent = nexus("adapters", "test", "files/a", "--to", "chat:7", "hello **there**")
    assert sent.returncode == 0, sent.stderr
    assert "(native)" in sent.stdout
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["text"] == "hello **there**" and record["target"]["to"] == "chat:7"

    listing = nexus("adapters", "list", "--json")
    [row] = json.loads(listing.stdout)
    assert row["supports"] == ["send", "stream", "health"] and row["accounts"]["a"]["agent"] == "helper"

    assert nexus("adapters", "disable", "files/a").returncode == 0
    refused = nexus("adapters", "test", "files/a", "--to", "chat:7", "again")
    assert refused.returncode == 2 and "files/a is disabled" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_register_a_shell_adapter_and_deliver_in_blocks(nexus: RunNexus, tmp_path: Path) -> None:
    log = tmp_path / "hello.log"
    command = f"{EXAMPLES / 'hello_adapter.sh'} {log}"
    assert nexus("adapters", "register", "hello", "--command", command).returncode == 0
    assert nexus("adapters", "enable", "hello/x").returncode == 0
    sent = nexus("adapters", "test", "hello/x", "--to", "bob", "hi from shell")
    assert sent.returncode == 0, sent.stderr
    assert "(blocks)" in sent.stdout
    assert log.read_text() == "[bob] hi from shell\n"


def test_testing_an_account_that_is_not_configured_delivers_nothing(nexus: RunNexus, tmp_path: Path) -> None:
    """``test NAME/ACCOUNT`` of an unknown account ran the adapter anyway, with no config and no credential."""
    log = tmp_path / "hello.log"
    assert nexus("adapters", "register", "hello", "--command", f"{EXAMPLES / 'hello_adapter.sh'} {log}").returncode == 0
    for account in ("x", "y"):
        assert nexus("adapters", "enable", f"hello/{account}").returncode == 0
    refused = nexus("adapters", "test", "hello/nope", "--to", "bob", "hi")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (
        "nexus: config error: account: adapter 'hello' has no account 'nope' (accounts: x, y; see nexus adapters list)"
    )
    assert not log.exists(), "the adapter was started"
    unknown = nexus("adapters", "test", "nowhere/x", "--to", "bob", "hi")
    assert unknown.returncode == 2 and "no adapter named 'nowhere' (configured: hello)" in unknown.stderr


def test_health_reports_each_account_and_fails_when_one_is_down(nexus: RunNexus, tmp_path: Path) -> None:
    with FakeTelegram(token="1:good") as tg:
        assert nexus("adapters", "register", "tg", "--builtin", "telegram").returncode == 0
        for account, var in (("ok", "GOOD_TOKEN"), ("bad", "BAD_TOKEN")):
            result = nexus(
                "adapters", "enable", f"tg/{account}", "--credential-env", var, "--set", f"api_base={tg.base_url}"
            )
            assert result.returncode == 0, result.stderr
        health = nexus("adapters", "health", env={"GOOD_TOKEN": "1:good", "BAD_TOKEN": "2:bad"})
    assert health.returncode == 1
    assert "ok    tg/ok: connected" in health.stdout
    assert "FAIL  tg/bad: not connected: Telegram 401: Unauthorized" in health.stdout


def test_bad_input_is_one_line_and_exit_2(nexus: RunNexus, isolated_env: Path) -> None:
    unknown = nexus("adapters", "enable", "nope/x")
    assert unknown.returncode == 2 and "no adapter named 'nope'" in unknown.stderr
    malformed = nexus("adapters", "enable", "files")
    assert malformed.returncode == 2 and "expected NAME/ACCOUNT" in malformed.stderr
    missing = nexus("adapters", "register", "gone", "--command", "/no/such/adapter")
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert not (isolated_env / "nexus.toml").exists(), "nothing is written when the adapter does not answer"
    for result in (unknown, malformed, missing):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_an_invalid_edit_is_refused_and_nothing_written(nexus: RunNexus, isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    config = isolated_env / "nexus.toml"
    config.write_text('[adapters.files]\nbuiltin = "jsonl"\n')
    result = nexus("adapters", "enable", "files/a", "--set", "path=[1,2]", "--set", "=x")
    assert result.returncode == 2 and "--set expects KEY=VALUE" in result.stderr
    assert config.read_text() == '[adapters.files]\nbuiltin = "jsonl"\n'


def test_adapters_config_is_strict(nexus: RunNexus, isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('[adapters.files]\nbuiltin = "jsonl"\nmode = "fast"\n')
    result = nexus("adapters", "list")
    assert result.returncode == 2 and "adapters.files.mode" in result.stderr


def test_an_adapter_command_with_an_unbalanced_quote_is_refused_not_a_traceback(
    nexus: RunNexus, isolated_env: Path
) -> None:
    """``register`` and ``list`` printed shlex's traceback; ``doctor`` said nothing of it."""
    registered = nexus("adapters", "register", "bad", "--command", "python3 'unclosed")
    assert registered.returncode == 2 and "Traceback" not in registered.stderr, registered.stderr
    assert "--command: is not a command line (No closing quotation)" in registered.stderr
    assert not (isolated_env / "nexus.toml").exists(), "nothing is written"
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('[adapters.bad]\ncommand = "python3 \'x"\n')
    for args in (("adapters", "list"), ("doctor",)):
        result = nexus(*args)
        said = result.stdout + result.stderr
        assert "Traceback" not in said and "nexus.toml:2: adapters.bad.command: is not a command line" in said, said
        assert result.returncode != 0, said


def test_what_an_adapter_says_about_itself_cannot_drive_the_terminal(nexus: RunNexus) -> None:
    """Its ``info`` printed raw at registration cleared the screen (``ESC[2J``), a health error's ``\\r ESC[2K``
    overwrote the FAIL line with "ok … all fine"."""
    script = Path(__file__).parents[1] / "adapters" / "scripts" / "loud.py"
    registered = nexus("adapters", "register", "loud", "--command", f"{sys.executable} {script}")
    assert registered.returncode == 0, registered.stderr
    assert r"registered loud: x\x1b[31mRED\r\x1b[2Kfake 1\x1b[2J, supports send, health" in registered.stdout
    assert nexus("adapters", "enable", "loud/a").returncode == 0
    runs = [
        nexus("adapters", "list"),
        nexus("adapters", "health"),
        nexus("adapters", "test", "loud/a", "--to", "c", "hi"),
    ]
    for done in runs:
        assert "\x1b" not in done.stdout + done.stderr and "\r" not in done.stdout + done.stderr, done
    assert r"FAIL  loud/a: " in runs[1].stdout and r"\r\x1b[2Kok" in runs[1].stdout
    assert r"message ids: \x1b[31mid" in runs[2].stdout


def test_adapter_and_account_names_must_be_addressable(nexus: RunNexus, isolated_env: Path) -> None:
    """``../x`` was registered (and its "next: enable ../x/<account>" could never work), ``a:b`` made targets
    that read two ways, and an ESC went into nexus.toml and back to the terminal raw."""
    config = isolated_env / "nexus.toml"
    isolated_env.mkdir(parents=True, exist_ok=True)
    config.write_text('default_model = "openai/gpt-4o-mini"\n')
    for name in ("../x", "a:b", "a b", "a\x1b", "n" * 65):
        done = nexus("adapters", "register", name, "--builtin", "console")
        assert done.returncode == 2 and "cannot be used" in done.stderr and "\x1b" not in done.stderr, (name, done)
    assert nexus("adapters", "register", "esc", "--builtin", "console").returncode == 0
    for account in ("a:b", "a b", "a\x1bb", "x" * 65):
        done = nexus("adapters", "enable", f"esc/{account}")
        assert done.returncode == 2 and "account" in done.stderr and "cannot be used" in done.stderr, (account, done)
    assert "accounts" not in config.read_text(), "nothing written for a refused name"


def test_set_types_only_plain_numbers(nexus: RunNexus, isolated_env: Path) -> None:
    """``nan``, ``inf``, ``Infinity``, ``1_000``, ``1e3`` and ``+5`` became numbers (Python's int()/float()); a NaN
    in an account's config made its adapter's context invalid JSON."""
    import tomllib

    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('default_model = "openai/gpt-4o-mini"\n')
    assert nexus("adapters", "register", "files", "--builtin", "jsonl").returncode == 0
    values = ("nan", "inf", "Infinity", "1_000", "1e3", "+5", "8080", "-3", "1.5", "true")
    sets = [arg for i, raw in enumerate(values) for arg in ("--set", f"k{i}={raw}")]
    assert nexus("adapters", "enable", "files/a", *sets).returncode == 0
    stored = tomllib.loads((isolated_env / "nexus.toml").read_text())["adapters"]["files"]["accounts"]["a"]["config"]
    assert [stored[f"k{i}"] for i in range(len(values))] == [*values[:6], 8080, -3, 1.5, True]


def test_health_says_a_monitor_gave_up_until_the_account_is_enabled_again(
    nexus: RunNexus, isolated_env: Path, tmp_path: Path
) -> None:
    from nexus.adapters._failures import record

    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('default_model = "openai/gpt-4o-mini"\n')
    assert nexus("adapters", "register", "files", "--builtin", "jsonl").returncode == 0
    assert nexus("adapters", "enable", "files/a", "--set", f"path={tmp_path / 'out.jsonl'}").returncode == 0
    record(isolated_env, "files", "a", "adapter files/a monitor: gave up after 5 restarts (last: exited with code 7)")
    failed = nexus("adapters", "health")
    assert failed.returncode == 1 and "FAIL  files/a: its monitor gave up: " in failed.stdout, failed.stdout
    assert nexus("adapters", "enable", "files/a").returncode == 0  # "fix the adapter, then enable it again"
    healthy = nexus("adapters", "health")
    assert healthy.returncode == 0 and "ok    files/a" in healthy.stdout, healthy.stdout
