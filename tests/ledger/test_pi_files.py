"""pi session files on the SQLite ledger: round trips of real pi files, branches, bad files, native sessions."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger, LedgerError, NewSession, PiFormatError, SessionExistsError, TurnDetails, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.pi_jsonl import export_pi_session
from nexus.llm.types import TextContent, UserMessage
from nexus.testing.conformance.support import compaction, reply, texts, tool_round, user

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "pi-sessions"
if not FIXTURES.exists():
    FIXTURES = Path("/work/shared/fixtures/pi-sessions")


@pytest.fixture(params=["sqlite-memory", "sqlite-file"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    """A fresh, empty SQLite ledger (pi files go through its synchronous methods until they move to ``ledger.pi``)."""
    ledger = Ledger.open(":memory:" if request.param == "sqlite-memory" else tmp_path / "agents.db")
    yield ledger
    ledger.close()


def qa_turn(ledger: Ledger, session: str, q: str, a: str, **kw: object) -> str:
    """Write a finished turn: one user question, one assistant answer."""
    return run_inline(
        ledger.turns.write(
            TurnWrite(session, None, query_messages=[user(q)], response_messages=[reply(a)], details=TurnDetails(**kw))
        )
    )  # type: ignore[arg-type]


def compact_turn(ledger: Ledger, session: str, through: str, first_kept: str | None, **kw: object) -> str:
    """Write a compaction turn summarising up to ``through`` and keeping turns from ``first_kept``."""
    return run_inline(
        ledger.turns.write(
            TurnWrite(session, None, compaction=compaction(through, first_kept), details=TurnDetails(**kw))
        )
    )  # type: ignore[arg-type]


# --------------------------------------------------------------------------- pi session files


def _pi_messages(path: Path) -> list[dict[str, object]]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [e["message"] for e in lines if e.get("type") == "message"]


@pytest.mark.parametrize("name", ["openai-tools-3-turns", "anthropic-thinking-2-turns"])
def test_pi_round_trip_preserves_every_message(backend: Ledger, tmp_path: Path, name: str) -> None:
    source = FIXTURES / f"{name}.jsonl"
    result = run_inline(backend.pi.import_pi(source, "imported"))
    original = _pi_messages(source)
    assert result.messages == len(original) and result.fork_labels == []
    assert result.kept_entries == {"model_change": 1, "thinking_level_change": 1}
    first = run_inline(backend.turns.history("imported"))
    assert len(first) == len(original)
    head = run_inline(backend.sessions.head("imported"))
    assert head is not None and head.provider in ("fakeprov", "fakeclaude")
    out = export_pi_session(backend, "imported", tmp_path / "out.jsonl")
    assert _pi_messages(out) == original  # every message, field for field, in pi's shapes
    exported = [json.loads(x) for x in out.read_text().splitlines()]
    assert exported[0]["type"] == "session" and exported[0]["version"] == 3
    assert any(e["type"] == "model_change" for e in exported)
    assert all(len(e["id"]) == 8 and "T" in e["timestamp"] for e in exported[1:])
    run_inline(backend.pi.import_pi(out, "again"))
    assert run_inline(backend.turns.history("again")) == first


def test_pi_branches_become_forks_and_compaction_turns(backend: Ledger, tmp_path: Path) -> None:
    entries = [
        {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        _pi_msg("a1", None, "user", "first"),
        _pi_msg("a2", "a1", "assistant", "answer one"),
        _pi_msg("b1", "a2", "user", "branch B"),
        _pi_msg("b2", "b1", "assistant", "answer B"),
        _pi_msg("c1", "a2", "user", "branch C"),
        _pi_msg("c2", "c1", "assistant", "answer C"),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "c2",
            "timestamp": "2026-01-01T00:00:09.000Z",
            "summary": "S",
            "firstKeptEntryId": "c1",
            "tokensBefore": 500,
        },
        {
            "type": "label",
            "id": "l1",
            "parentId": "k1",
            "timestamp": "2026-01-01T00:00:09.500Z",
            "targetId": "c1",
            "label": "keep",
        },
        _pi_msg("d1", "l1", "user", "after compaction"),
        _pi_msg("d2", "d1", "assistant", "answer D"),
    ]
    path = tmp_path / "branches.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = run_inline(backend.pi.import_pi(path, "pi"))
    assert result.compactions == 1 and result.kept_entries == {"compaction": 1, "label": 1}
    assert len(result.fork_labels) == 1
    assert texts(run_inline(backend.turns.history(result.fork_labels[0]))) == [
        "U:first",
        "A:answer one",
        "U:branch B",
        "A:answer B",
    ]
    assert texts(run_inline(backend.turns.history("pi"))) == [
        "U:[Previous conversation summary]\nS",
        "U:branch C",
        "A:answer C",
        "U:after compaction",
        "A:answer D",
    ]
    out = export_pi_session(backend, "pi", tmp_path / "out.jsonl")
    exported = [json.loads(x) for x in out.read_text().splitlines()]
    kept = [e["id"] for e in exported[1:] if e["type"] != "model_change"]
    assert kept == ["a1", "a2", "c1", "c2", "k1", "l1", "d1", "d2"]  # pi ids survive the round trip
    assert exported[1]["type"] == "model_change" and exported[1]["modelId"] == "m"  # pi files start with one
    assert [e["parentId"] for e in exported[1:]] == [None] + [e["id"] for e in exported[1:-1]]  # one linear path


def _pi_msg(entry_id: str, parent: str | None, role: str, text: str) -> dict[str, object]:
    message: dict[str, object] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        message.update(
            api="openai-completions",
            provider="p",
            model="m",
            stopReason="stop",
            usage={"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
        )
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": message,
    }


@pytest.mark.parametrize(
    ("mutate", "line", "problem"),
    [
        (lambda lines: [*lines[:-1], lines[-1][: len(lines[-1]) // 2]], 17, "not valid JSON"),
        (lambda lines: [lines[0].replace('"version":3', '"version":1'), *lines[1:]], 1, "version 1"),
        (lambda lines: [lines[0].replace('"version":3', '"version":99'), *lines[1:]], 1, "version 99"),
        (lambda lines: lines[1:], 1, "session header"),
        (
            lambda lines: [*lines[:5], lines[5].replace('"parentId":"f22afedd"', '"parentId":"ffffffff"'), *lines[6:]],
            6,
            "no earlier line",
        ),
        (lambda lines: [*lines, lines[3]], 18, "duplicate entry id"),
        # valid JSON, but no UTF-8 text: it failed inside the ledger's write with a traceback (HTTP: a 500)
        (lambda lines: [*lines[:3], lines[3].replace("Read hello", r"Read \ud800 hello"), *lines[4:]], 4, "surrogate"),
        (
            lambda lines: [
                *lines,
                '{"type":"message","id":"zz","parentId":"b19d5ab9","message":{"role":"assistant",'
                '"content":[{"type":"video"}]}}',
            ],
            18,
            "invalid assistant message",
        ),
        # fields named in the file's terms (they read "invalid literal for int() with base 10: 'yesterday'")
        (
            lambda lines: [
                *lines[:3],
                lines[3].replace('"timestamp":1795657460400', '"timestamp":"yesterday"'),
                *lines[4:],
            ],
            4,
            r"invalid user message: timestamp must be an integer \(got 'yesterday'\)",
        ),
        (
            lambda lines: [*lines[:4], re.sub(r'"input":\d+', '"input":"lots"', lines[4], count=1), *lines[5:]],
            5,
            r"invalid assistant message: usage.input must be an integer \(got 'lots'\)",
        ),
        (
            lambda lines: [
                *lines,
                '{"type":"compaction","id":"zz","parentId":"b19d5ab9","summary":"s","tokensBefore":"many"}',
            ],
            18,
            r"invalid compaction entry: tokensBefore must be an integer \(got 'many'\)",
        ),
        (lambda lines: [*lines, lines[0]], 18, "a second session header"),  # two files joined
    ],
)
def test_pi_bad_files_name_the_line_and_import_nothing(
    backend: Ledger, tmp_path: Path, mutate: Callable[[list[str]], list[str]], line: int, problem: str
) -> None:
    lines = (FIXTURES / "openai-tools-3-turns.jsonl").read_text().splitlines()
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(mutate(lines)) + "\n")
    with pytest.raises(PiFormatError, match=problem) as info:
        run_inline(backend.pi.import_pi(path, "bad"))
    assert info.value.line == line and f"bad.jsonl:{line}:" in str(info.value)
    assert run_inline(backend.sessions.list()) == []


def test_pi_unreadable_file_is_a_ledger_error(backend: Ledger, tmp_path: Path) -> None:
    for path in (tmp_path / "missing.jsonl", tmp_path):
        with pytest.raises(LedgerError, match="cannot read the pi session file"):
            run_inline(backend.pi.import_pi(path, "x"))
    assert run_inline(backend.sessions.list()) == []


def test_pi_import_is_one_transaction(backend: Ledger) -> None:
    run_inline(backend.sessions.create(NewSession("taken")))
    with pytest.raises(SessionExistsError):
        run_inline(backend.pi.import_pi(FIXTURES / "openai-tools-3-turns.jsonl", "taken"))
    assert [s.label for s in run_inline(backend.sessions.list())] == ["taken"]
    assert run_inline(backend.turns.history("taken")) == []


def test_conformance_exported_native_session_imports_back(backend: Ledger, tmp_path: Path) -> None:
    run_inline(backend.sessions.create(NewSession("native")))
    t1 = run_inline(
        backend.turns.write(
            TurnWrite(
                "native",
                None,
                query_messages=[UserMessage([TextContent("look")])],
                response_messages=[*tool_round("c1"), reply("seen")],
            )
        )
    )
    compact_turn(backend, "native", through=t1, first_kept=t1)
    qa_turn(backend, "native", "next", "fine")
    out = export_pi_session(backend, "native", tmp_path / "native.jsonl")
    entries = [json.loads(x) for x in out.read_text().splitlines()]
    assert [e["type"] for e in entries] == [
        "session",
        "model_change",
        "message",
        "message",
        "message",
        "message",
        "compaction",
        "message",
        "message",
    ]
    assert entries[3]["message"]["stopReason"] == "toolUse"
    assert entries[6]["firstKeptEntryId"] == entries[2]["id"]
    run_inline(backend.pi.import_pi(out, "back"))
    assert texts(run_inline(backend.turns.history("back"))) == texts(run_inline(backend.turns.history("native")))


def test_an_exported_entry_is_never_stamped_before_its_parent(backend: Ledger, tmp_path: Path) -> None:
    """The user message is stamped when it was sent, before its turn opened: the opening ``model_change`` (its
    parent) took the turn's start and came out 3 ms after its child."""
    run_inline(backend.sessions.create(NewSession("stamps")))
    sent = UserMessage([TextContent("look")], timestamp=1_790_000_000_000)
    details = TurnDetails(started_at=sent.timestamp + 3)
    run_inline(
        backend.turns.write(
            TurnWrite("stamps", None, query_messages=[sent], response_messages=[reply("seen")], details=details)
        )
    )
    out = export_pi_session(backend, "stamps", tmp_path / "stamps.jsonl")
    entries = [json.loads(x) for x in out.read_text().splitlines()]
    by_id = {e["id"]: e for e in entries if "id" in e}
    for entry in entries:
        parent = by_id.get(entry.get("parentId"))
        if parent is not None:
            assert parent["timestamp"] <= entry["timestamp"], (parent, entry)
    assert entries[1]["type"] == "model_change" and entries[1]["timestamp"].endswith(".000Z")


@pytest.mark.parametrize(
    ("file_id", "expected"),
    [
        ("ab/cd/../ef-1", "pi-ab-cd-..-ef-1"),  # a label with "/" the HTTP API could not address
        ("x\n\x1b]0;PWNED\x07y", "pi-x-0-PWNED-y"),  # broke `label=$(nexus sessions import f)`
        ("   ", None),  # nothing usable: a random id
        ("0b2f6e2a-1c4d-4e6f-9a7b-123456789abc", "pi-0b2f6e2a-1c4d"),  # what pi writes: as before
    ],
)
def test_a_label_made_from_the_files_id_is_one_the_api_and_a_shell_can_use_again(
    backend: Ledger, tmp_path: Path, file_id: str, expected: str | None
) -> None:
    from nexus.ledger.labels import label_problem

    entries = [
        {"type": "session", "version": 3, "id": file_id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        _pi_msg("a1", None, "user", "first"),
        _pi_msg("a2", "a1", "assistant", "answer one"),
    ]
    path = tmp_path / "odd-id.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    label = run_inline(backend.pi.import_pi(path)).session_label
    assert label_problem(label) is None, label
    assert label == expected if expected is not None else label.startswith("pi-") and len(label) == 16
    assert texts(run_inline(backend.turns.history(label))) == ["U:first", "A:answer one"]


def test_export_writes_through_a_symlink_and_keeps_the_files_mode(backend: Ledger, tmp_path: Path) -> None:
    """The API renamed a temporary file over the target: a symlink became a copy its target never saw,
    and a 0600 file became 0644 (the CLI's export already kept both)."""
    run_inline(backend.sessions.create(NewSession("main")))
    qa_turn(backend, "main", "question", "answer")
    real, link = tmp_path / "kept" / "main.jsonl", tmp_path / "link.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o600)
    link.symlink_to(real)
    export_pi_session(backend, "main", link)
    assert link.is_symlink() and real.read_text().startswith('{"type":"session"')
    assert real.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in real.parent.iterdir()] == ["main.jsonl"]  # no temporary file left beside it
