"""``nexus agents …`` and ``nexus queue …`` on a real ledger: registry, queue listing, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nexus.cli import main
from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore


def nexus(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_empty_home_lists_nothing_and_creates_nothing(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert nexus(capsys, "agents", "list") == (0, "no agents yet (add one: nexus agents add ID)\n", "")
    assert nexus(capsys, "queue", "list", "--json") == (0, "[]\n", "")
    code, _, err = nexus(capsys, "agents", "show", "ghost")
    assert code == 2 and "unknown agent 'ghost'" in err
    assert not (isolated_env / "agents.db").exists()


def test_add_list_show_remove(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = nexus(capsys, "agents", "add", "lead", "--role", "manager")
    assert code == 0 and out == "agent lead (manager) talks in session agent:lead\n"
    nexus(capsys, "agents", "add", "coder", "--model", "openai/gpt-4o-mini", "--tools", "read,edit", "--session", "c")
    code, out, _ = nexus(capsys, "agents", "list", "--json")
    listed = json.loads(out)
    assert [(a["id"], a["role"], a["session"]) for a in listed] == [
        ("coder", "worker", "c"),
        ("lead", "manager", "agent:lead"),
    ]
    assert listed[0]["spec"] == {"model": "openai/gpt-4o-mini", "tools": ["read", "edit"]}
    code, out, _ = nexus(capsys, "agents", "show", "coder")
    assert "model    openai/gpt-4o-mini" in out and "tools    read, edit" in out
    assert nexus(capsys, "agents", "rm", "coder")[0] == 0
    with Ledger.open(isolated_env / "agents.db") as ledger:
        assert [a.agent_id for a in BrokerStore(ledger.database).list_agents()] == ["lead"]
        assert run_inline(ledger.sessions.get("c")).label == "c"  # the session stays


def test_show_tells_no_tools_from_the_config_policy(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --tools "" stores [] and the agent runs with no tool at all; show said "(the config policy)", every tool
    nexus(capsys, "agents", "add", "bare", "--tools", "")
    nexus(capsys, "agents", "add", "full")
    assert "tools    (none)\n" in nexus(capsys, "agents", "show", "bare")[1]
    assert "tools    (the config policy)\n" in nexus(capsys, "agents", "show", "full")[1]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["agents", "add", "has space"], "is not usable"),
        (["agents", "add", "user"], "is not usable"),
        (["agents", "add", "w", "--tools", "reed"], "did you mean 'read'"),
        (["agents", "add", "w", "--model", "gpt-4o"], "must be PROVIDER/MODEL"),
        (["agents", "add", "w", "--model", "nope/zzz"], "unknown provider 'nope'"),
        (["agents", "add", "w", "--session", "../etc"], "cannot hold '/'"),
        (["agents", "add", "w", "--session", "a\nb"], "control characters"),
        (["agents", "add", "w", "--model", "local/not-configured"], "unknown local model"),
        (["agents", "add", "w", "--session", " "], "--session is empty"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    isolated_env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, _, err = nexus(capsys, *argv)
    assert code == 2 and expected in err and "Traceback" not in err
    assert not (isolated_env / "agents.db").exists()


def test_queue_list_shows_failed_items_with_their_reason(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nexus(capsys, "agents", "add", "coder")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        for n in range(3):
            store.accept(
                agent_id="coder", session_label="agent:coder", message_id=f"m{n}", sender="user",
                message={"content": f"job {n}"}, mode="followup",
            )  # fmt: skip
        first, failed, _ = store.items()
        store.claim([first.id])
        store.deliver([first.id], "turn-1")
        store.fail([failed.id], "its run was cut 3 times (the process died); not retried again")
    code, out, _ = nexus(capsys, "queue", "list", "coder")
    assert code == 0 and "job 0" not in out and "job 1" in out and "job 2" in out
    assert "reason: its run was cut 3 times" in out
    code, out, _ = nexus(capsys, "queue", "list", "--all", "--json")
    assert [(i["content"], i["status"]) for i in json.loads(out)] == [
        ("job 0", "delivered"), ("job 1", "failed"), ("job 2", "queued"),
    ]  # fmt: skip
    code, out, _ = nexus(capsys, "queue", "clear", "coder")
    assert out == "dropped 1 waiting message of coder\n"
    code, _, err = nexus(capsys, "queue", "clear", "ghost")
    assert code == 2 and "unknown agent 'ghost' (known: coder)" in err


def test_queue_list_shows_the_session_of_each_item(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nexus(capsys, "agents", "add", "helper")
    with Ledger.open(isolated_env / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        store.accept(agent_id="helper", session_label="agent:helper", message_id="own", sender="user",
                     message={"content": "in its own session"}, mode="followup")  # fmt: skip
        store.accept(agent_id="helper", session_label="helper~dm~telegram~42", message_id="chat", sender="telegram:42",
                     message={"content": "from a chat", "session": "dm:telegram:42"}, mode="followup",
                     session_key="dm:telegram:42")  # fmt: skip
        assert run_inline(ledger.sessions.get("helper~dm~telegram~42")).routing_key == "dm:telegram:42"
    _, out, _ = nexus(capsys, "queue", "list")
    header, own, chat = out.splitlines()
    assert "SESSION" in header and "agent:helper" in own and "helper~dm~telegram~42" in chat
    _, out, _ = nexus(capsys, "queue", "list", "--json")
    assert [(i["session"], i["session_key"]) for i in json.loads(out)] == [
        ("agent:helper", None), ("helper~dm~telegram~42", "dm:telegram:42"),
    ]  # fmt: skip


def test_agents_declared_in_the_config_are_listed_and_persisted(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    isolated_env.mkdir(parents=True, exist_ok=True)
    (isolated_env / "nexus.toml").write_text('[agents.lead]\nrole = "manager"\nmodel = "openai/gpt-4o-mini"\n')
    _, out, _ = nexus(capsys, "agents", "list", "--json")
    (lead,) = json.loads(out)
    assert (lead["id"], lead["role"], lead["spec"]) == ("lead", "manager", {"model": "openai/gpt-4o-mini"})
    (isolated_env / "nexus.toml").write_text("")  # removed from the file: it stays registered
    _, out, _ = nexus(capsys, "agents", "list", "--json")
    assert [a["id"] for a in json.loads(out)] == ["lead"]


def test_rm_refuses_an_agent_with_waiting_messages_until_its_queue_is_cleared(
    isolated_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert nexus(capsys, "agents", "add", "delme")[0] == 0
    with Ledger.open(isolated_env / "agents.db") as ledger:
        store = BrokerStore(ledger.database)
        for n in (1, 2):
            store.accept(
                agent_id="delme", session_label="agent:delme", message_id=f"d{n}", sender="user",
                message={"content": f"D{n}"}, mode="followup",
            )  # fmt: skip
    code, _, err = nexus(capsys, "agents", "rm", "delme")
    assert code == 2 and "agent 'delme' still has 2 waiting message(s): clear its queue first" in err
    assert nexus(capsys, "agents", "show", "delme")[0] == 0  # still registered, its queue still listed
    assert nexus(capsys, "queue", "clear", "delme")[0] == 0
    assert nexus(capsys, "agents", "rm", "delme")[0] == 0


def test_add_refuses_another_agents_per_sender_session(isolated_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert nexus(capsys, "agents", "add", "m")[0] == 0
    code, _, err = nexus(capsys, "agents", "add", "squat", "--session", "m~dm~telegram~42")
    assert code == 2 and "belongs to agent 'm'" in err
    assert nexus(capsys, "agents", "show", "squat")[0] == 2  # nothing stored
