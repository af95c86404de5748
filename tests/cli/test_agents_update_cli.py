"""``nexus agents add`` on an existing agent updates it: what the command leaves out keeps its value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus.cli import main
from nexus.ledger import Ledger
from nexus.ledger.broker_store import BrokerStore

from .cli_process import RunNexus


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _agent(capsys: pytest.CaptureFixture[str], agent_id: str) -> dict[str, object]:
    code, out, _ = run_cli(capsys, "agents", "show", agent_id, "--json")
    assert code == 0
    shown: dict[str, object] = json.loads(out)
    return shown


def test_re_adding_keeps_the_fields_not_given(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("agents", "add", "x", "--role", "manager", "--model", "openai/gpt-4o-mini", "--session", "S")
    assert run_cli(capsys, *argv, "--tools", "read")[0] == 0
    code, out, _ = run_cli(capsys, "agents", "add", "x", "--session", "S")
    assert code == 0 and out == "agent x (manager) talks in session S\n"
    assert _agent(capsys, "x") == {
        "id": "x",
        "role": "manager",
        "session": "S",
        "spec": {"model": "openai/gpt-4o-mini", "tools": ["read"]},
        "queue_depth": 0,
        "created_at": _agent(capsys, "x")["created_at"],
    }
    assert run_cli(capsys, "agents", "add", "x", "--tools", "bash")[0] == 0  # changes the tools only
    shown = _agent(capsys, "x")
    assert (shown["role"], shown["session"]) == ("manager", "S")
    assert shown["spec"] == {"model": "openai/gpt-4o-mini", "tools": ["bash"]}


def test_a_new_agent_gets_the_defaults(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "agents", "add", "w") == (0, "agent w (worker) talks in session agent:w\n", "")
    assert _agent(capsys, "w")["spec"] == {}


def test_a_configured_agent_with_an_unreachable_model_is_a_config_error_with_its_line(
    isolated_env: Path, nexus: RunNexus
) -> None:
    isolated_env.mkdir()
    config = isolated_env / "nexus.toml"
    config.write_text('[agents.lead]\nrole = "manager"\nmodel = "nope/zzz"\n\n[agents.ok]\nmodel = "openai/gpt-4o"\n')
    for argv in (
        ["agents", "list"],
        ["queue", "list"],
        ["queue", "drain"],
        ["send", "ok", "hi"],
        ["serve", "--port", "0"],
    ):
        done = nexus(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert f"{config}:3: agents.lead.model: unknown provider 'nope'" in done.stderr
        assert "Traceback" not in done.stderr
        if argv[0] in ("agents", "queue") and argv[1] == "list":
            assert not (isolated_env / "agents.db").exists()
    assert not (isolated_env / "agents.db").exists() or _agents(isolated_env) == []  # send/serve open the ledger first


def _agents(home: Path) -> list[str]:
    with Ledger.open(home / "agents.db") as ledger:
        return [row.agent_id for row in BrokerStore(ledger.database).list_agents()]


def test_a_session_another_agent_talks_in_is_refused(isolated_env: Path, nexus: RunNexus) -> None:
    assert nexus("agents", "add", "a", "--session", "s", "--model", "openai/gpt-4o").returncode == 0
    for argv in (["agents", "add", "b", "--session", "s"], ["agents", "add", "agent-a-twin", "--session", "s"]):
        refused = nexus(*argv)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert refused.stderr.strip().splitlines() == [
            "nexus: error: --session: session 's' belongs to agent 'a': each agent talks in its own session; "
            "pick another label, or remove 'a' first"
        ]
    assert _agents(isolated_env) == ["a"]
    assert nexus("agents", "add", "a", "--session", "s").returncode == 0  # its own session: an update
    assert nexus("agents", "rm", "a").returncode == 0
    assert nexus("agents", "add", "b", "--session", "s").returncode == 0  # free again once a is removed
    assert _agents(isolated_env) == ["b"]


def test_two_configured_agents_in_one_session_are_a_config_error(isolated_env: Path, nexus: RunNexus) -> None:
    isolated_env.mkdir()
    config = isolated_env / "nexus.toml"
    config.write_text('[agents.a]\nsession = "s"\n\n[agents.b]\nrole = "manager"\nsession = "s"\n')
    refused = nexus("agents", "list")
    assert refused.returncode == 2
    assert f"{config}:6: agents.b.session: 's' is agent 'a''s session; give each its own" in refused.stderr
    assert not (isolated_env / "agents.db").exists()


def test_a_table_sets_the_keys_it_gives_and_keeps_the_rest(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table saying only ``role = "manager"`` for an agent added with ``--tools read`` replaced the whole
    agent: its tools widened to every tool the config allows, its model was dropped, and both stayed so
    after the table was deleted."""
    argv = ("agents", "add", "c1", "--tools", "read", "--model", "openai/gpt-4o-mini", "--session", "S")
    assert run_cli(capsys, *argv)[0] == 0
    config = isolated_env / "nexus.toml"
    config.write_text('[agents.c1]\nrole = "manager"\n')
    assert run_cli(capsys, "agents", "list")[0] == 0
    shown = _agent(capsys, "c1")
    assert (shown["role"], shown["session"]) == ("manager", "S")
    assert shown["spec"] == {"model": "openai/gpt-4o-mini", "tools": ["read"]}
    config.write_text('[agents.c1]\ntools = ["read", "bash"]\nsystem_prompt = "Be brief."\n')
    assert run_cli(capsys, "agents", "list")[0] == 0  # a key the table gives wins
    spec = {"model": "openai/gpt-4o-mini", "tools": ["read", "bash"], "system_prompt": "Be brief."}
    assert _agent(capsys, "c1")["spec"] == spec
    config.write_text('[agents.c1]\nsystem_prompt = ""\n')  # an empty prompt removes it
    assert run_cli(capsys, "agents", "list")[0] == 0
    assert _agent(capsys, "c1")["spec"] == {"model": "openai/gpt-4o-mini", "tools": ["read", "bash"]}
    config.unlink()
    shown = _agent(capsys, "c1")
    assert (shown["role"], shown["session"]) == ("manager", "S")


def test_a_table_taking_a_registered_agents_session_names_its_line(isolated_env: Path, nexus: RunNexus) -> None:
    """It was exit 1 with a bare message; every other table problem is ``file:line`` and exit 2."""
    assert nexus("agents", "add", "w1").returncode == 0
    config = isolated_env / "nexus.toml"
    config.write_text('[agents.tcfg]\nrole = "worker"\nsession = "agent:w1"\n')
    for argv in (["agents", "list"], ["send", "tcfg", "hi"]):
        refused = nexus(*argv)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert f"{config}:3: agents.tcfg.session: session 'agent:w1' belongs to agent 'w1'" in refused.stderr
    assert _agents(isolated_env) == ["w1"]


def test_removing_an_agent_its_table_defines_is_refused(isolated_env: Path, nexus: RunNexus) -> None:
    """``rm`` of an agent with an ``[agents.<id>]`` table: the next command would apply the table again and
    bring it back, so it is refused, naming the table's line; without the table it goes."""
    isolated_env.mkdir()
    config = isolated_env / "nexus.toml"
    config.write_text('[agents.keep]\nrole = "manager"\n\n[agents.newp]\n')
    assert nexus("agents", "list").returncode == 0
    refused = nexus("agents", "rm", "newp")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (
        f"nexus: error: agent newp is defined in {config}:4 ([agents.newp]); delete that table first, or the next "
        "command brings the agent back, then run `nexus agents rm` again"
    )
    assert _agents(isolated_env) == ["keep", "newp"]
    config.write_text('[agents.keep]\nrole = "manager"\n')
    assert nexus("agents", "rm", "newp").returncode == 0
    assert nexus("agents", "list").returncode == 0
    assert _agents(isolated_env) == ["keep"]
