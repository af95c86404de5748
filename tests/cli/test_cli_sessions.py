"""``nexus sessions …`` against a real ledger in the test's NEXUS_HOME."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from nexus.ledger import Ledger, NewSession, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from nexus.testing import FakeProviderServer, steps

RunNexus = Callable[..., subprocess.CompletedProcess[str]]


def _seed(home: Path) -> list[str]:
    """Session ``demo`` with two turns (the second with a tool call); returns the turn ids."""
    home.mkdir(parents=True, exist_ok=True)
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("demo")))
        first = run_inline(
            ledger.turns.write(
                TurnWrite(
                    "demo",
                    None,
                    query_messages=[UserMessage("hello there")],
                    response_messages=[
                        AssistantMessage(
                            content=[TextContent("General Kenobi")], provider="openai", model="gpt-4o-mini"
                        )
                    ],
                    usage=Usage(input=10, output=3, total=13),
                    details=TurnDetails(model="gpt-4o-mini", provider="openai"),
                )
            )
        )
        call = ToolCall(id="c1", name="ls", arguments={"path": "."})
        second = run_inline(
            ledger.turns.write(
                TurnWrite(
                    "demo",
                    None,
                    query_messages=[UserMessage("list files")],
                    response_messages=[
                        AssistantMessage(
                            content=[call], stop_reason="tool_use", provider="openai", model="gpt-4o-mini"
                        ),
                        ToolResultMessage("c1", "ls", [TextContent("README.md\nsrc/")]),
                        AssistantMessage(content=[TextContent("Two entries.")], provider="openai", model="gpt-4o-mini"),
                    ],
                    details=TurnDetails(model="gpt-4o-mini", provider="openai"),
                )
            )
        )
    return [first, second]


def test_list_with_no_database(nexus: RunNexus, isolated_env: Path) -> None:
    result = nexus("sessions", "list")
    assert result.returncode == 0
    assert result.stdout.strip() == "no sessions yet"
    assert not (isolated_env / "agents.db").exists(), "listing must not create the database"
    assert json.loads(nexus("sessions", "list", "--json").stdout) == []


def test_list_show_and_history(nexus: RunNexus, isolated_env: Path) -> None:
    first, second = _seed(isolated_env)
    listing = nexus("sessions", "list")
    assert listing.returncode == 0
    header, row = listing.stdout.splitlines()
    assert header.split()[:2] == ["LABEL", "TURNS"]
    assert row.split()[:2] == ["demo", "2"] and row.endswith(second)

    data = json.loads(nexus("sessions", "list", "--json").stdout)
    assert [(s["label"], s["head_turn_id"]) for s in data] == [("demo", second)]

    show = json.loads(nexus("sessions", "show", "demo", "--json").stdout)
    assert show["turns"] == 2 and show["head_turn_id"] == second
    assert show["head_model"] == "openai/gpt-4o-mini"

    history = nexus("sessions", "history", "demo")
    assert history.returncode == 0
    out = history.stdout
    assert f"turn {first}" in out and f"turn {second}" in out
    assert out.index("user: hello there") < out.index("assistant: General Kenobi") < out.index("user: list files")
    assert '→ ls({"path": "."})' in out
    assert "tool result (ls): README.md ⏎ src/" in out

    lines = [json.loads(line) for line in nexus("sessions", "history", "demo", "--json").stdout.splitlines()]
    assert [line["turn_id"] for line in lines] == [first, first, second, second, second, second]
    assert lines[0]["message"]["role"] == "user"


def test_history_shows_typed_text_and_raw_shows_the_event_context(nexus: RunNexus, isolated_env: Path) -> None:
    header = "[Event context]\nTime: 2026-01-02T03:04:05+00:00 (UTC)\nChannel: cli\n[/Event context]\n\n"
    long_result = "line\n" * 200
    isolated_env.mkdir(parents=True, exist_ok=True)
    with Ledger.open(isolated_env / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("ctx")))
        call = ToolCall(id="c1", name="ls", arguments={})
        run_inline(
            ledger.turns.write(
                TurnWrite(
                    "ctx",
                    None,
                    query_messages=[UserMessage(header + "what is in here?")],
                    response_messages=[
                        AssistantMessage(
                            content=[call], stop_reason="tool_use", provider="openai", model="gpt-4o-mini"
                        ),
                        ToolResultMessage("c1", "ls", [TextContent(long_result)]),
                        AssistantMessage(content=[TextContent("Many lines.")], provider="openai", model="gpt-4o-mini"),
                    ],
                    details=TurnDetails(model="gpt-4o-mini", provider="openai"),
                )
            )
        )
        run_inline(
            ledger.turns.write(
                TurnWrite("ctx", None, query_messages=[UserMessage("no header here")], response_messages=[])
            )
        )

    shown = nexus("sessions", "history", "ctx")
    assert shown.returncode == 0, shown.stderr
    assert "  user: what is in here?\n" in shown.stdout
    assert "Event context" not in shown.stdout and "Channel: cli" not in shown.stdout
    assert "  user: no header here\n" in shown.stdout, "a message without the header is shown as is"
    assert f"({len(long_result)} chars)" in shown.stdout, "tool results are shortened"

    raw = nexus("sessions", "history", "ctx", "--raw")
    assert raw.returncode == 0, raw.stderr
    assert f"  user: {header}what is in here?\n" in raw.stdout, "the user message exactly as the model got it"
    assert f"tool result (ls): {long_result}" in raw.stdout and "chars)" not in raw.stdout
    assert "  user: no header here\n" in raw.stdout

    stored = [json.loads(line) for line in nexus("sessions", "history", "ctx", "--json").stdout.splitlines()]
    assert stored[0]["message"]["content"] == header + "what is in here?", "--json is always as stored"
    exported = nexus("sessions", "export", "ctx").stdout
    assert "[Event context]" in exported, "export keeps what is stored"


def test_fork_then_history_stops_at_the_fork_point(nexus: RunNexus, isolated_env: Path) -> None:
    first, _ = _seed(isolated_env)
    result = nexus("sessions", "fork", first, "--label", "alt")
    assert result.returncode == 0
    assert "forked session alt" in result.stdout
    history = nexus("sessions", "history", "alt").stdout
    assert "General Kenobi" in history and "list files" not in history
    labels = {s["label"] for s in json.loads(nexus("sessions", "list", "--json").stdout)}
    assert labels == {"demo", "alt"}
    again = nexus("sessions", "fork", first, "--label", "alt")
    assert again.returncode == 2, "a --label taken is a wrong argument, as every other --label error (docs/cli.md)"
    assert "--label: a session or alias named 'alt' already exists" in again.stderr and "Traceback" not in again.stderr


def test_fork_without_a_label_names_it_after_its_session(nexus: RunNexus, isolated_env: Path) -> None:
    first, _ = _seed(isolated_env)
    labels = []
    for _ in range(2):
        result = nexus("sessions", "fork", first)
        assert result.returncode == 0, result.stderr
        labels.append(result.stdout.split()[2])
    assert labels == ["demo-fork-1", "demo-fork-2"]  # not fork-01m8b8…: a name a person can type


def test_export_and_import_round_trip(nexus: RunNexus, isolated_env: Path, tmp_path: Path) -> None:
    _seed(isolated_env)
    target = tmp_path / "demo.jsonl"
    exported = nexus("sessions", "export", "demo", "-o", str(target))
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "session"
    for argv in (["-o", "-"], []):  # stdout unless -o FILE
        stdout_copy = nexus("sessions", "export", "demo", *argv)
        assert stdout_copy.returncode == 0, stdout_copy.stderr
        streamed = [json.loads(line) for line in stdout_copy.stdout.splitlines()]
        assert streamed[0]["type"] == "session"
        # entry ids are fresh on every export; the messages are the same
        assert [e.get("message") for e in streamed] == [e.get("message") for e in lines]
    assert not (isolated_env / "demo.jsonl").exists() and not Path("demo.jsonl").exists()

    imported = nexus("sessions", "import", str(target), "--label", "copy")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == "copy\n", "stdout is the new label alone (for scripts)"
    assert "as session copy" in imported.stderr
    unnamed = nexus("sessions", "import", str(target))
    assert unnamed.returncode == 0, unnamed.stderr
    new_label = unnamed.stdout.strip()
    assert new_label and new_label != "copy" and "\n" not in new_label
    assert "General Kenobi" in nexus("sessions", "history", new_label).stdout
    original = nexus("sessions", "history", "demo").stdout
    copy = nexus("sessions", "history", "copy").stdout
    for text in ("hello there", "General Kenobi", "list files", "Two entries."):
        assert text in copy and text in original


def test_unknown_session_and_turn_are_clean_errors(nexus: RunNexus, isolated_env: Path, tmp_path: Path) -> None:
    _seed(isolated_env)
    for argv in (["show", "nope"], ["history", "nope"], ["export", "nope"], ["fork", "01NOTATURN"]):
        result = nexus("sessions", *argv)
        assert result.returncode == 2, argv  # as an unknown agent (they exited 1 while it exited 2)
        assert result.stderr.startswith("nexus: error:")
        assert "Traceback" not in result.stderr
    missing = nexus("sessions", "import", str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 1 and "is not a file" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n", encoding="utf-8")
    broken = nexus("sessions", "import", str(bad))
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    still = json.loads(nexus("sessions", "list", "--json").stdout)
    assert [s["label"] for s in still] == ["demo"], "a failed import stores nothing"


def _leave_open_turn(home: Path, label: str, text: str) -> None:
    """A process that opens a turn of ``label`` and dies without closing it."""
    code = (
        "import os; from nexus.ledger import Ledger, NewSession, TurnOpen; from nexus.llm.types import UserMessage\n"
        "from nexus.ledger._sql_db import run_inline\n"
        f"l = Ledger.open({str(home / 'agents.db')!r}); run_inline(l.sessions.ensure(NewSession({label!r})))\n"
        f"run_inline(l.turns.open(TurnOpen({label!r}, [UserMessage({text!r})]))); os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_sessions_commands_recover_turns_of_dead_processes(nexus: RunNexus, isolated_env: Path) -> None:
    _, second = _seed(isolated_env)
    _leave_open_turn(isolated_env, "demo", "question the crash swallowed")
    history = nexus("sessions", "history", "demo")
    assert history.returncode == 0, history.stderr
    assert "closed 1 turn left open" in history.stderr
    assert "question the crash swallowed" in history.stdout and "[aborted]" in history.stdout
    with Ledger.open(isolated_env / "agents.db") as ledger:
        assert run_inline(ledger.turns.open_turns()) == []
        head = run_inline(ledger.sessions.head("demo"))
        assert head is not None and head.status == "aborted" and head.parent_turn_id == second


def test_doctor_recovers_turns_of_dead_processes(nexus: RunNexus, isolated_env: Path) -> None:
    _seed(isolated_env)
    _leave_open_turn(isolated_env, "demo", "lost")
    result = nexus("doctor")
    assert "closed 1 turn left open by a stopped process" in result.stdout, result.stdout
    with Ledger.open(isolated_env / "agents.db") as ledger:
        assert run_inline(ledger.turns.open_turns()) == []


def test_import_takes_a_bom_warns_of_messages_no_model_sees_and_names_label_when_taken(
    tmp_path: Path, nexus: RunNexus
) -> None:
    """A stranger's trial: a file with a UTF-8 byte-order mark was refused ("may be truncated"); a message entry
    of a role Nexus does not know (pi's bashExecution) vanished from the conversation without a word; importing
    the same file again said "pick another label" without saying how."""

    def msg(entry_id: str, parent: str | None, message: dict[str, object]) -> dict[str, object]:
        return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
                "message": message}  # fmt: skip

    entries = [
        {"type": "session", "version": 3, "id": "bom-file-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        msg("a1", None, {"role": "user", "content": "list the files", "timestamp": 1}),
        msg("a2", "a1", {"role": "bashExecution", "command": "ls", "output": "a b", "timestamp": 2}),
        msg("a3", "a2", {"role": "assistant", "content": [{"type": "text", "text": "two files"}], "api": "x",
                         "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 3,
                         "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                                   "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}),
    ]  # fmt: skip
    path = tmp_path / "bom.jsonl"
    path.write_text("\ufeff" + "".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    first = nexus("sessions", "import", str(path))
    assert first.returncode == 0, first.stderr
    assert first.stdout == "pi-bom-file-1\n"
    assert "1 message of a role other than user, assistant and toolResult kept as metadata only" in first.stderr
    again = nexus("sessions", "import", str(path))
    assert again.returncode == 2 and "--label NAME" in again.stderr and "Traceback" not in again.stderr, again.stderr
    assert "already imported as 'pi-bom-file-1'" in again.stderr
    assert "--label:" not in again.stderr, "no --label was given: the error does not blame one"
    assert nexus("sessions", "import", str(path), "--label", "second").returncode == 0
    taken = nexus("sessions", "import", str(path), "--label", "second")
    assert taken.returncode == 2 and "--label: a session or alias named 'second' already exists" in taken.stderr


def test_a_run_into_an_archived_session_restores_it(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    """A stranger's trial: ``nexus run -s X`` into a session archived over HTTP went on hidden from every list."""
    _seed(home)
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.update("demo", status="archived"))
    assert "demo" not in nexus("sessions", "list").stdout
    server.script(steps.text("back again"))
    ran = nexus("run", "-s", "demo", "are you there?")
    assert ran.returncode == 0 and ran.stdout == "back again\n", ran.stderr
    assert "session: demo (was archived: restored by this turn)" in ran.stderr  # it said nothing
    listed = json.loads(nexus("sessions", "list", "--json").stdout)
    assert [(s["label"], s["status"]) for s in listed] == [("demo", "active")]
    server.script(steps.text("still here"))
    again = nexus("run", "--json", "-s", "demo", "and now?")
    end = json.loads(again.stdout.splitlines()[-1])
    assert (end["type"], end["sessionRestored"]) == ("stream_end", False)  # active already: nothing restored
    assert "archived" not in again.stderr


def test_json_says_a_run_restored_an_archived_session(home: Path, server: FakeProviderServer, nexus: RunNexus) -> None:
    _seed(home)
    with Ledger.open(home / "agents.db") as ledger:
        run_inline(ledger.sessions.update("demo", status="archived"))
    server.script(steps.text("back"))
    ran = nexus("run", "--json", "-s", "demo", "hello?")
    end = json.loads(ran.stdout.splitlines()[-1])
    assert (end["type"], end["status"], end["sessionRestored"]) == ("stream_end", "completed", True), ran.stdout


def test_the_import_label_rule_is_in_the_help_and_holds(tmp_path: Path, nexus: RunNexus) -> None:
    """A stranger's trial found the rule nowhere it looked: ``import ../../x.jsonl`` made ``pi-…`` from the file's
    session id, not its name. The help says so, with the example it gives checked here."""
    helped = nexus("sessions", "import", "--help")
    assert "the session id the file's header holds" in helped.stdout and "not the file's name" in helped.stdout
    assert "→ pi-0b2f6e2a-1c4d" in helped.stdout and "LABEL-fork-1" in helped.stdout
    header = {"type": "session", "version": 3, "id": "0b2f6e2a-1c4d-4e6f-9a7b-123456789abc",
              "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}  # fmt: skip
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "x.jsonl").write_text(json.dumps(header) + "\n", encoding="utf-8")
    imported = nexus("sessions", "import", str(tmp_path / "a" / "b" / ".." / ".." / "x.jsonl"))
    assert (imported.returncode, imported.stdout) == (0, "pi-0b2f6e2a-1c4d\n"), imported.stderr


def test_import_names_entries_of_a_type_pi_does_not_define_and_keeps_them(tmp_path: Path, nexus: RunNexus) -> None:
    """A stranger's trial: an entry of a made-up type was imported without a word (kept with its turn, read by
    nothing). It is still kept and exported back, and the import now names it; pi's own types are not named."""
    entries = [
        {"type": "session", "version": 3, "id": "odd-file-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        {"type": "message", "id": "a1", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "hello", "timestamp": 1}},
        {"type": "alien_entry", "id": "a2", "parentId": "a1", "timestamp": "2026-01-01T00:00:02.000Z", "data": 1},
        {"type": "label", "id": "a3", "parentId": "a2", "timestamp": "2026-01-01T00:00:03.000Z", "targetId": "a1",
         "label": "start"},
        {"type": "session_info", "id": "a4", "parentId": "a3", "timestamp": "2026-01-01T00:00:04.000Z", "name": "x"},
    ]  # fmt: skip
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    imported = nexus("sessions", "import", str(path))
    assert imported.returncode == 0, imported.stderr
    warnings = [line for line in imported.stderr.splitlines() if "does not define" in line]
    assert len(warnings) == 1 and "(1 'alien_entry')" in warnings[0], imported.stderr
    assert "label" not in warnings[0] and "session_info" not in warnings[0]
    exported = nexus("sessions", "export", "pi-odd-file-1")
    assert exported.returncode == 0, exported.stderr
    kept = [json.loads(line) for line in exported.stdout.splitlines() if '"alien_entry"' in line]
    assert len(kept) == 1 and kept[0]["data"] == 1, exported.stdout


def test_an_import_counts_in_words_and_says_when_nothing_was_a_message(tmp_path: Path, nexus: RunNexus) -> None:
    """A stranger's trial: a file of one entry nothing reads imported as "(1 turns, 0 messages)", without a word
    that the new session is empty."""
    header = {"type": "session", "version": 3, "id": "zz-unk", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    odd = {"type": "weird_entry", "id": "a1", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z"}
    path = tmp_path / "unk.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps(odd) + "\n", encoding="utf-8")
    imported = nexus("sessions", "import", str(path))
    assert imported.returncode == 0, imported.stderr
    assert "as session pi-zz-unk (1 turn, 0 messages)" in imported.stderr
    assert f"nexus: warning: {path} holds no message: session pi-zz-unk is empty" in imported.stderr
    message = {"type": "message", "id": "b1", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": "hello", "timestamp": 1}}  # fmt: skip
    path.write_text(json.dumps({**header, "id": "one-msg"}) + "\n" + json.dumps(message) + "\n", encoding="utf-8")
    again = nexus("sessions", "import", str(path))
    assert "(1 turn, 1 message)" in again.stderr and "holds no message" not in again.stderr, again.stderr


def test_history_names_the_model_that_answered_and_why_a_turn_failed(nexus: RunNexus, isolated_env: Path) -> None:
    # an outside trial: the header named the model that failed (not the fallback that answered); a turn whose
    # compaction failed showed only the overflow; a turn killed before anything was journaled showed no reason
    isolated_env.mkdir(parents=True, exist_ok=True)
    overflow = "maximum context length is 4096 tokens; reduce the length"
    with Ledger.open(isolated_env / "agents.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("why")))
        answered = AssistantMessage(content=[TextContent("from the fallback")], provider="fake2", model="m2")
        refused = AssistantMessage(content=[], stop_reason="error", error_message=overflow, provider="fake", model="m1")
        for response, status, error in (
            ([answered], "completed", None),
            ([refused], "failed", {"message": "compaction_failure: summarisation failed: 401 bad key"}),
            ([], "aborted", {"message": "the process 4242 stopped before finishing it; closed by recovery"}),
            ([], "aborted", {"message": "the process (vm:9940) stopped before finishing it; closed by recover()"}),
            ([refused], "failed", {"message": overflow}),
        ):
            run_inline(ledger.turns.write(TurnWrite(
                "why", None, query_messages=[UserMessage("q")], response_messages=response, status=status,
                error=error, details=TurnDetails(model="m1", provider="fake"),
            )))  # fmt: skip
    shown = nexus("sessions", "history", "why")
    assert shown.returncode == 0, shown.stderr
    turns = shown.stdout.split("── turn ")[1:]
    assert "[completed] fake2/m2" in turns[0]
    assert "compaction_failure: summarisation failed: 401 bad key" in turns[1] and overflow in turns[1]
    assert "✗ aborted: the process 4242 stopped before finishing it" in turns[2]
    assert "closed when the ledger was next opened" in turns[3] and "recover()" not in turns[3]  # an older turn's
    assert "✗" not in turns[4]  # its message says why already: not twice
