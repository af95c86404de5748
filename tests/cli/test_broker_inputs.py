"""Bad input to the broker commands (issue 20, item 16), each as a real ``nexus`` process.

The promise: one clear line naming what is wrong (exit 2), nothing stored and nothing created;
the ``[agents.<id>]`` tables are held to the rules ``nexus agents add`` and ``POST /v1/agents``
apply, ``nexus doctor`` fails on what every broker command refuses, and a table never prints a
control character raw.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore

from .cli_process import RunNexus


def _config(home: Path, body: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text('default_model = "openai/gpt-4o-mini"\n' + body, encoding="utf-8")


def _refused(result: object, *expected: str) -> str:
    code, stderr = result.returncode, result.stderr  # type: ignore[attr-defined]
    assert code == 2 and "Traceback" not in stderr, stderr
    for text in expected:
        assert text in stderr, stderr
    return str(stderr)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["agents", "add", "w1", "--model", ""], "argument --model: is empty"),
        (["agents", "add", "w1", "--model", "  "], "argument --model: is empty"),
        (["agents", "add", "w1", "--model", "openai/gpt\x1b[31m"], "holds control characters"),
        (["send", "w1", "hi", "--id", ""], "argument --id: is empty; leave --id out to get a new id"),
        (["send", "w1", "hi", "--id", "a\nb"], "argument --id: 'a\\nb' holds control characters"),
        (["send", "w1", "hi", "--id", "x" * 100_000], "argument --id: is 100,000 characters; a message id has at most"),
        (["send", "w1", "hi", "--wait", "--timeout", "-5"], "argument --timeout: '-5': give a positive number"),
        (["send", "w1", "hi", "--wait", "--timeout", "nan"], "argument --timeout: 'nan': give a positive number"),
        (["send", "w1", "hi", "--wait", "--timeout", "inf"], "argument --timeout: 'inf': give a positive number"),
        (["sessions", "fork", "01ABC", "--label", ""], "argument --label: is empty; leave --label out for the default"),
        (["sessions", "import", "pi.jsonl", "--label", " "], "argument --label: is empty; leave --label out"),
    ],
    ids=[
        "model-empty",
        "model-blank",
        "model-control",
        "id-empty",
        "id-newline",
        "id-huge",
        "timeout-negative",
        "timeout-nan",
        "timeout-inf",
        "fork-label-empty",
        "import-label-blank",
    ],
)
def test_bad_broker_arguments_are_refused_and_nothing_is_stored(
    isolated_env: Path, nexus: RunNexus, argv: list[str], expected: str
) -> None:
    _config(isolated_env, "")
    assert nexus("agents", "add", "w1").returncode == 0
    before = (isolated_env / "agents.db").read_bytes()
    _refused(nexus(*argv), expected)
    with Ledger.open(isolated_env / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        assert store.items() == []
        assert [(row.agent_id, row.spec) for row in store.list_agents()] == [("w1", {})]
    assert len(before) > 0


def test_a_flood_of_invalid_utf8_on_stdin_is_refused_before_it_is_read_whole(isolated_env: Path) -> None:
    """50 MB of bytes that are not UTF-8: refused for its length after reading ~1 MB, without first saying
    it was "sent with them replaced" (it took 44 s and said so)."""
    import os
    import subprocess
    import sys

    _config(isolated_env, "")
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "NEXUS_HOME": str(isolated_env), "PYTHONPATH": str(src)}
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus.cli", "send", "w1", "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert process.stdin is not None
    written = 0
    try:
        while written < 50_000_000:
            process.stdin.write(b"\xff" * 1_000_000)
            written += 1_000_000
    except BrokenPipeError:  # the command stopped reading: it refused the message
        pass
    finally:
        try:
            process.stdin.close()
        except BrokenPipeError:
            pass
    assert process.stderr is not None
    text = process.stderr.read().decode()
    process.wait(timeout=120)
    assert process.returncode == 2, text
    assert text.splitlines() == [
        "nexus: error: the message on stdin is over the limit of 1,000,000 characters; send a shorter one"
    ]
    assert written < 50_000_000  # it stopped reading long before the end
    assert not (isolated_env / "agents.db").exists()


BAD_AGENTS = (
    '[agents.a]\nmodel = "nosuch/x"\nsession = "shared"\n\n'
    '[agents.b]\nsession = "shared"\ntools = ["read", "bsh"]\n\n'
    '[agents.c]\nsession = "a/b"\n\n'
    '[agents.d]\nsession = "red\\u001b[31m"\n'
)


@pytest.mark.parametrize(
    "argv",
    [["send", "a", "hi"], ["queue", "drain"], ["serve", "--port", "0"], ["agents", "list"], ["queue", "list"]],
    ids=["send", "drain", "serve", "agents-list", "queue-list"],
)
def test_a_bad_agents_table_is_refused_like_the_cli_and_creates_nothing(
    isolated_env: Path, nexus: RunNexus, argv: list[str]
) -> None:
    _config(isolated_env, BAD_AGENTS)
    stderr = _refused(
        nexus(*argv, env={"OPENAI_API_KEY": "test"}),
        "invalid config (5 problems):",
        "nexus.toml:3: agents.a.model: unknown provider 'nosuch'",
        "nexus.toml:7: agents.b.session: 'shared' is agent 'a''s session; give each its own",
        "nexus.toml:8: agents.b.tools: unknown tool 'bsh': did you mean 'bash'?",
        "nexus.toml:11: agents.c.session: a session label cannot hold '/' or '\\' (got 'a/b')",
        "nexus.toml:14: agents.d.session: a session label cannot hold control characters (got 'red\\x1b[31m')",
    )
    assert "\x1b" not in stderr
    assert sorted(path.name for path in isolated_env.iterdir()) == ["nexus.toml"]  # no agents.db, lock, workspace


def test_doctor_fails_on_what_every_broker_command_refuses(isolated_env: Path, nexus: RunNexus) -> None:
    _config(isolated_env, 'fallbacks = ["nosuch/y"]\n\n' + BAD_AGENTS)
    result = nexus("doctor", env={"OPENAI_API_KEY": "test"})
    assert result.returncode == 1, result.stdout
    lines = result.stdout.splitlines()
    failed = [line for line in lines if line.startswith("[fail]")]
    assert [line.split()[1] for line in failed] == ["model", "agents"]
    assert "nexus.toml:2: fallbacks: unknown provider 'nosuch' in model 'nosuch/y'" in result.stdout
    assert "5 problems (every broker command refuses to start)" in result.stdout
    assert "agents.b.tools: unknown tool 'bsh'" in result.stdout and "\x1b" not in result.stdout
    _config(isolated_env, '[agents.a]\n\n[agents.b]\ntools = ["read"]\n')
    fine = nexus("doctor", env={"OPENAI_API_KEY": "test"})
    assert "[ok  ] agents     a, b" in fine.stdout
    assert not [line for line in fine.stdout.splitlines() if line.startswith("[fail]")], fine.stdout


def test_agents_and_queue_listings_escape_control_characters_a_row_holds(isolated_env: Path, nexus: RunNexus) -> None:
    """A row stored before these checks (or written by hand) with an escape sequence prints it escaped."""
    _config(isolated_env, "")
    assert nexus("agents", "add", "w1").returncode == 0
    conn = sqlite3.connect(isolated_env / "agents.db")
    with conn:
        conn.execute(
            "UPDATE agents SET session_label = 'evil\x1b]0;owned\x07', config_json = ?",
            ('{"model": "openai/x\\u001b[2J", "tools": ["read\\u001b[31m"]}',),
        )
    conn.close()
    for argv in (["agents", "list"], ["agents", "show", "w1"]):
        shown = nexus(*argv)
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
        assert "evil\\x1b]0;owned\\x07" in shown.stdout and "openai/x\\x1b[2J" in shown.stdout
    with Ledger.open(isolated_env / "agents.db") as ledger:  # message text may hold anything: it is kept as sent
        BrokerStore(ledger.database).accept(agent_id="w1", session_label="agent:w1", message_id="m1", sender="user",
                                            message={"content": "look \x1b[2J here"}, mode="followup")  # fmt: skip
    listed = nexus("queue", "list")
    assert listed.returncode == 0 and "\x1b" not in listed.stdout and "look \\x1b[2J here" in listed.stdout
