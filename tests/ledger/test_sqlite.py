"""SQLite-specific behaviour: file location, pragmas, migrations, fast decoding, ids."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers import reply, tool_round, user

from nexus.ledger import Ledger, SchemaVersionError, default_db_path
from nexus.ledger._decode import decode_bodies, decode_body, encode_body
from nexus.ledger._schema import MIGRATIONS, SCHEMA_VERSION, _split, pack_key, unpack_key
from nexus.ledger._ulid import new_ulid, ulid_time_ms
from nexus.llm.serde import MessageFormatError, message_from_json, message_to_json
from nexus.llm.types import (
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
)


def test_default_db_path_follows_nexus_home(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_db_path() == isolated_env / "agents.db"
    with Ledger.open() as ledger:
        assert Path(ledger.path) == isolated_env / "agents.db"
    assert (isolated_env / "agents.db").exists()
    monkeypatch.delenv("NEXUS_HOME")
    assert default_db_path() == Path.home() / ".nexus" / "agents.db"


def test_pragmas_wal_foreign_keys_busy_timeout(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        conn = ledger.database.connection
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        for name in (
            "sessions",
            "turns",
            "messages",
            "tool_calls",
            "compactions",
            "threads",
            "session_history",
            "session_aliases",
            "queue_items",
            "agents",
            "broker_messages",
        ):
            assert name in tables


def test_empty_v0_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()  # a zero-byte / user_version 0 file
    with Ledger.open(path) as ledger:
        assert ledger.database.found_version == 0
        ledger.create_session("s")
        assert ledger.get_session("s").label == "s"


def test_older_version_is_migrated_keeping_data(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in _split(MIGRATIONS[0]):  # hand-made version 1 file with a session in it
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO sessions (label, created_at, updated_at) VALUES ('old', 1, 1)")
    conn.close()
    with Ledger.open(path) as ledger:
        assert ledger.database.found_version == 1
        assert ledger.get_session("old").created_at == 1
        cols = {r[1] for r in ledger.database.connection.execute("PRAGMA table_info(queue_items)")}
        assert "turn_id" in cols
        assert ledger.database.connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        Ledger.open(path)


def _samples() -> list[Message]:
    return [
        UserMessage("plain", timestamp=1),
        UserMessage([TextContent("t", signature="s"), ImageContent("aGk=", "image/png")], timestamp=2),
        AssistantMessage(
            [
                ThinkingContent("hm", "sig", redacted=True),
                TextContent("x"),
                ToolCall("c", "n", {"a": [1]}, "raw", "ts"),
            ],
            api="anthropic-messages",
            provider="anthropic",
            model="claude",
            usage=Usage(1, 2, 3, 4, 5, 15, Cost(0.1, 0.2, 0.3, 0.4, 1.0)),
            stop_reason="error",
            error_message="boom",
            error_kind="rate_limit",
            retry_after=1.5,
            response_id="r1",
            timestamp=3,
        ),
        AssistantMessage([], timestamp=4),
        ToolResultMessage("c", "n", [TextContent("out")], is_error=True, details={"diff": "-a\n+b"}, timestamp=5),
        ToolResultMessage("c", "n", [], timestamp=6),
    ]


def test_fast_decoder_reads_schema_2_bodies_like_serde() -> None:
    samples = _samples()
    bodies = [message_to_json(m) for m in samples]
    assert decode_bodies(bodies) == [message_from_json(b) for b in bodies] == samples


def test_compact_body_round_trips_every_field() -> None:
    samples = [
        *_samples(),
        AssistantMessage([ToolCall("c2", "grep", {"p": "x"})], api="a", provider="p", model="m", timestamp=7),
        UserMessage([TextContent("only text")], timestamp=8),
    ]
    origins = {1: ("anthropic-messages", "anthropic", "claude"), 2: ("", "", ""), 3: ("a", "p", "m")}
    ids = {v: k for k, v in origins.items()}
    bodies = [
        encode_body(m, ids[(m.api, m.provider, m.model)] if isinstance(m, AssistantMessage) else 0) for m in samples
    ]
    assert decode_bodies(bodies, origins) == samples
    assert [decode_body(b, origins) for b in bodies] == samples
    assert all('"role"' not in b and '"api"' not in b for b in bodies)


def test_compact_body_of_a_typical_turn_is_small() -> None:
    call = AssistantMessage(
        [ToolCall("call_1", "read", {"path": "a.py"})], "openai-completions", "openai", "gpt-4o", Usage(1200, 20)
    )
    assert len(encode_body(call, 1)) < len(message_to_json(call)) - 80


def test_bodies_of_a_version_2_file_stay_readable_after_migration(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:2]:
        for statement in _split(script):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    old = [user("old q"), *tool_round("c1"), reply("old a")]
    conn.execute("INSERT INTO segments (id, root_turn_id) VALUES (1, 'T1')")
    conn.execute(
        "INSERT INTO turns (id, segment_id, seq, session_label, status, started_at, query_count, message_count) "
        "VALUES ('T1', 1, 0, 's', 'completed', 1, 1, 4)"
    )
    conn.execute("INSERT INTO sessions (label, thread_id, created_at, updated_at) VALUES ('s', 'T1', 1, 1)")
    for i, m in enumerate(old):
        conn.execute(
            "INSERT INTO messages (key, role, body) VALUES (?, ?, ?)", (pack_key(1, 0, i), m.role, message_to_json(m))
        )
    conn.close()
    with Ledger.open(path) as ledger:
        assert ledger.history("s") == old
        ledger.write_turn(None, "s", query_messages=[user("new q")], response_messages=[reply("new a")])
        assert ledger.history("s")[:4] == old and len(ledger.history("s")) == 6
        assert [m.message for m in ledger.messages("T1")] == old
        assert ledger.tool_calls("T1") == [] and ledger.get_message(pack_key(1, 0, 3)).message == old[3]


def test_fast_decoder_falls_back_to_strict_errors() -> None:
    with pytest.raises(MessageFormatError, match="unknown role"):
        decode_bodies(['{"role":"system","content":"x"}'])


def test_keys_pack_and_unpack() -> None:
    assert unpack_key(pack_key(5, 1234, 17)) == (5, 1234, 17)
    assert pack_key(1, 0, 0) < pack_key(1, 0, 1) < pack_key(1, 1, 0) < pack_key(2, 0, 0)


def test_ulids_are_monotonic_and_carry_time() -> None:
    before = now_ms()
    ids = [new_ulid() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(i) == 26 for i in ids)
    assert before <= ulid_time_ms(ids[0]) <= now_ms()


def test_messages_are_stored_as_compact_json(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        ledger.create_session("s")
        ledger.write_turn(None, "s", query_messages=[user("hi")], response_messages=[*tool_round("c1"), reply("ok")])
        bodies = [r[0] for r in ledger.database.connection.execute("SELECT body FROM messages")]
        assert all(", " not in b and '": ' not in b for b in bodies)
        started = ledger.database.connection.execute("SELECT started_at FROM turns").fetchone()[0]
        assert isinstance(started, int) and started > 1_600_000_000_000  # Unix ms


def test_sessions_as_file_reopen_sees_everything(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Ledger.open(path) as ledger:
        ledger.create_session("s")
        ledger.write_turn(None, "s", query_messages=[user("hi")], response_messages=[reply("ok")])
        expected = ledger.history("s")
    with Ledger.open(path) as again:
        assert again.history("s") == expected


def test_message_cache_gives_the_same_history(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Ledger.open(path, message_cache=0) as plain, Ledger.open(path, message_cache=50) as cached:
        plain.create_session("s")
        t1 = plain.write_turn(None, "s", query_messages=[user("q0")], response_messages=[reply("a0")])
        for i in range(1, 40):
            plain.write_turn(
                None, "s", query_messages=[user(f"q{i}")], response_messages=[*tool_round(f"c{i}"), reply("a")]
            )
            if i % 7 == 0:
                assert cached.history("s") == plain.history("s")
        plain.fork(t1, "f")
        plain.write_turn(None, "f", query_messages=[user("fork")], response_messages=[reply("x")])
        assert cached.history("f") == plain.history("f")
        assert cached.history("s") == plain.history("s")
        middle = plain.turns("s")[20].id
        plain.move_pointer("s", middle)  # a shorter path than the cached one
        assert cached.history("s") == plain.history("s")
        plain.write_turn(None, "s", query_messages=[user("branch")], response_messages=[reply("b")])
        assert cached.history("s") == plain.history("s")
        assert cached._cache is not None and cached._cache.size <= 50


def test_ledger_satisfies_backend_protocol() -> None:
    from nexus.ledger import LedgerBackend

    with Ledger.open(":memory:") as ledger:
        assert isinstance(ledger, LedgerBackend)


def test_default_cache_returns_a_fresh_list_of_shared_messages(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger, Ledger.open(tmp_path / "a.db", message_cache=0) as plain:
        ledger.create_session("s")
        ledger.write_turn(None, "s", query_messages=[user("q")], response_messages=[*tool_round("c1"), reply("a")])
        first = ledger.history("s")
        first.append(user("not stored"))
        second = ledger.history("s")
        assert second is not first and second == plain.history("s") and len(second) == 4
        assert all(a is b for a, b in zip(first, second, strict=False))  # shared, read-only by contract
        ledger.write_turn(None, "s", query_messages=[user("q2")], response_messages=[reply("b")])
        assert ledger.history("s") == plain.history("s") and len(ledger.history("s")) == 6


def test_corrupt_compact_body_is_a_clear_error_not_a_wrong_message() -> None:
    origins = {1: ("api", "prov", "model")}
    with pytest.raises(MessageFormatError, match=r"is malformed.*KeyError: 7"):
        decode_bodies(['{"c":["x"],"o":1,"t":1}', '{"c":["x"],"o":7,"t":1}'], origins)  # unknown origin id
    with pytest.raises(MessageFormatError, match="KeyError: 'n'"):
        decode_bodies(['{"i":"c1","c":["out"],"t":1}'], origins)  # tool result without a tool name
    with pytest.raises(TypeError, match="cannot store"):
        encode_body("hello", 0)  # type: ignore[arg-type]
