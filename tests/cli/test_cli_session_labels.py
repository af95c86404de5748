"""A new session's label must be one the HTTP API can address (``/v1/sessions/{label}`` is one segment).

``nexus run -s``, ``nexus chat -s`` (and ``/session``), ``sessions fork --label`` and ``sessions import
--label`` refuse ``a/b`` and friends with exit 2 naming the option, creating nothing — while a session an
older version already created under such a label stays usable. Real processes against a fake provider.
"""

from __future__ import annotations

from pathlib import Path

from nexus.ledger import Ledger, NewSession, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, UserMessage
from nexus.testing import FakeProviderServer
from nexus.testing.steps import text

from .cli_process import RunNexus


def _labels(home: Path) -> list[str]:
    with Ledger.open(home / "agents.db") as ledger:
        return sorted(session.label for session in run_inline(ledger.sessions.list()))


def _old_session(home: Path, label: str) -> str:
    """A session an older version created with ``label``; returns its turn id."""
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession(label)))
        reply = AssistantMessage(content=[TextContent("old reply")], provider="fake", model="fake-model")
        turn = run_inline(
            ledger.turns.write(TurnWrite(label, None, query_messages=[UserMessage("old")], response_messages=[reply]))
        )
        return str(turn)


def test_run_and_chat_refuse_a_new_label_the_api_cannot_address(
    home: Path, nexus: RunNexus, server: FakeProviderServer
) -> None:
    for argv, stdin in ((["run", "-s", "a/b", "hi"], None), (["chat", "-s", "a\\b"], "hi\n")):
        refused = nexus(*argv, stdin=stdin)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith("nexus: error: --session: a session label cannot hold '/' or '\\'")
        assert "Traceback" not in refused.stderr
    assert not (home / "agents.db").exists()  # nothing created
    server.script(text("fine"))
    assert nexus("run", "-s", "ok", "hi").returncode == 0
    refused = nexus("run", "-s", "x/y", "hi")  # a ledger exists now: the session is looked up, still new
    assert refused.returncode == 2 and "--session" in refused.stderr
    assert _labels(home) == ["ok"]
    for dots in (".", ".."):  # a browser folds `/v1/sessions/../history` into `/v1/history`: no page opens them
        refused = nexus("run", "-s", dots, "hi")
        assert refused.returncode == 2 and f"a session label cannot be {dots!r}" in refused.stderr, refused.stderr
    assert _labels(home) == ["ok"]


def test_an_existing_session_with_such_a_label_stays_usable(
    home: Path, nexus: RunNexus, server: FakeProviderServer
) -> None:
    _old_session(home, "old/one")
    server.script(text("still works"), text("in chat too"))
    ran = nexus("run", "-s", "old/one", "again")
    assert ran.returncode == 0, ran.stderr
    assert "still works" in ran.stdout
    chatted = nexus("chat", "-s", "old/one", stdin="more\n")
    assert chatted.returncode == 0, chatted.stderr
    assert "in chat too" in chatted.stdout
    switched = nexus("chat", stdin="/session new/two\n/session old/one\n")
    assert switched.returncode == 0
    assert "/session: a session label cannot hold '/'" in switched.stderr
    assert "session: old/one (3 turns)" in switched.stdout
    assert _labels(home) == ["old/one"]


def test_fork_and_import_refuse_such_a_label(isolated_env: Path, nexus: RunNexus, tmp_path: Path) -> None:
    isolated_env.mkdir()
    turn = _old_session(isolated_env, "demo")
    exported = tmp_path / "demo.jsonl"
    assert nexus("sessions", "export", "demo", "-o", str(exported)).returncode == 0
    for argv in (["sessions", "fork", turn, "--label", "a/b"], ["sessions", "import", str(exported), "--label", "a/b"]):
        refused = nexus(*argv)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert refused.stderr.startswith("nexus: error: --label: a session label cannot hold '/'")
    assert nexus("sessions", "fork", turn, "--label", "ok-fork").returncode == 0
    assert _labels(isolated_env) == ["demo", "ok-fork"]


def test_a_new_label_longer_than_200_characters_is_refused(
    home: Path, nexus: RunNexus, server: FakeProviderServer
) -> None:
    """A stranger's trial made a session of 5,000 characters with -s; it then filled every session list."""
    refused = nexus("run", "-s", "é" * 201, "hi")
    assert refused.returncode == 2, refused.stderr
    assert "--session: a session label is at most 200 characters (got 201" in refused.stderr
    assert not (home / "agents.db").exists()
    server.script(text("fine"))
    assert nexus("run", "-s", "é" * 200, "hi").returncode == 0  # the longest is fine
    assert _labels(home) == ["é" * 200]
