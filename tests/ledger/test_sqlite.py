"""SQLite-specific behaviour: file location, pragmas, migrations, fast decoding, ids."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import types
from pathlib import Path

import pytest

from nexus.ledger import (
    Ledger,
    LedgerBusyError,
    LedgerError,
    NewSession,
    SchemaVersionError,
    TurnWrite,
    default_db_path,
)
from nexus.ledger._decode import decode_bodies, decode_body, encode_body
from nexus.ledger._migrate import _split
from nexus.ledger._schema import MIGRATIONS, SCHEMA_VERSION, pack_key, unpack_key
from nexus.ledger._sql_db import run_inline
from nexus.ledger._sqlite import BUSY_STEP_MS, DEFAULT_WAIT_S, wait_bound
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
from nexus.testing.conformance.support import reply, tool_round, user


def test_default_db_path_follows_nexus_home(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_db_path() == isolated_env / "agents.db"
    with Ledger.open() as ledger:
        assert Path(ledger.path) == isolated_env / "agents.db"
    assert (isolated_env / "agents.db").exists()
    monkeypatch.delenv("NEXUS_HOME")
    assert default_db_path() == Path.home() / ".nexus" / "agents.db"


def test_the_page_cache_of_each_connection_is_bounded_at_two_megabytes(tmp_path: Path) -> None:
    """SQLite's own default (2 MB), as the second connection for reads already had: 16 MB on the writing
    connection cost nothing less in CPU on a database of 11 MB (the whole of it fits in 16 MB), and in a
    benchmark with a small database it held the whole file, so it grew with every turn written."""
    with Ledger.open(tmp_path / "a.db") as ledger:
        conn = ledger.database.connection
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == -2000  # negative: KiB, not pages


def test_pragmas_wal_foreign_keys_busy_timeout(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        conn = ledger.database.connection
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_STEP_MS  # then retried up to the wait bound
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
        run_inline(ledger.sessions.create(NewSession("s")))
        assert run_inline(ledger.sessions.get("s")).label == "s"


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
        assert run_inline(ledger.sessions.get("old")).created_at == 1
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
        # estimated usage (a server reported none) keeps its mark, without a schema change
        AssistantMessage([TextContent("est")], "a", "p", "m", Usage(40, 3, total=43, estimated=True), timestamp=9),
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
        assert run_inline(ledger.turns.history("s")) == old
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("new q")], response_messages=[reply("new a")]))
        )
        assert run_inline(ledger.turns.history("s"))[:4] == old and len(run_inline(ledger.turns.history("s"))) == 6
        assert [m.message for m in run_inline(ledger.turns.messages("T1"))] == old
        assert (
            run_inline(ledger.turns.tool_calls("T1")) == []
            and run_inline(ledger.turns.message(pack_key(1, 0, 3))).message == old[3]
        )


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


def _ulid_value(ulid: str) -> int:
    """A ULID decoded whole: its 26 Crockford base-32 digits as one number."""
    number = 0
    for digit in ulid:
        number = number * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".index(digit)
    return number


def test_ulid_digits_encode_the_time_and_an_incrementing_random_part() -> None:
    """The time's digits are kept per millisecond and the random part encoded on its own: decoded whole,
    every id is its time above 80 random bits, and ids of one millisecond count up by one."""
    ids = [new_ulid() for _ in range(5000)]
    values = [_ulid_value(i) for i in ids]
    assert all(v < 2**128 for v in values)
    assert [v >> 80 for v in values] == [ulid_time_ms(i) for i in ids]
    same_ms = [(a, b) for a, b in itertools.pairwise(values) if a >> 80 == b >> 80]
    assert same_ms and all(b - a == 1 for a, b in same_ms)


def test_messages_are_stored_as_compact_json(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        run_inline(
            ledger.turns.write(
                TurnWrite("s", None, query_messages=[user("hi")], response_messages=[*tool_round("c1"), reply("ok")])
            )
        )
        bodies = [r[0] for r in ledger.database.connection.execute("SELECT body FROM messages")]
        assert all(", " not in b and '": ' not in b for b in bodies)
        started = ledger.database.connection.execute("SELECT started_at FROM turns").fetchone()[0]
        assert isinstance(started, int) and started > 1_600_000_000_000  # Unix ms


def test_sessions_as_file_reopen_sees_everything(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Ledger.open(path) as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("hi")], response_messages=[reply("ok")]))
        )
        expected = run_inline(ledger.turns.history("s"))
    with Ledger.open(path) as again:
        assert run_inline(again.turns.history("s")) == expected


def test_message_cache_gives_the_same_history(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Ledger.open(path, message_cache=0) as plain, Ledger.open(path, message_cache=50) as cached:
        run_inline(plain.sessions.create(NewSession("s")))
        t1 = run_inline(
            plain.turns.write(TurnWrite("s", None, query_messages=[user("q0")], response_messages=[reply("a0")]))
        )
        for i in range(1, 40):
            run_inline(
                plain.turns.write(
                    TurnWrite(
                        "s", None, query_messages=[user(f"q{i}")], response_messages=[*tool_round(f"c{i}"), reply("a")]
                    )
                )
            )
            if i % 7 == 0:
                assert run_inline(cached.turns.history("s")) == run_inline(plain.turns.history("s"))
        run_inline(plain.sessions.create(NewSession("f", origin="fork", head_turn_id=t1)))
        run_inline(
            plain.turns.write(TurnWrite("f", None, query_messages=[user("fork")], response_messages=[reply("x")]))
        )
        assert run_inline(cached.turns.history("f")) == run_inline(plain.turns.history("f"))
        assert run_inline(cached.turns.history("s")) == run_inline(plain.turns.history("s"))
        middle = run_inline(plain.turns.path("s"))[20].id
        run_inline(plain.sessions.move_pointer("s", middle))  # a shorter path than the cached one
        assert run_inline(cached.turns.history("s")) == run_inline(plain.turns.history("s"))
        run_inline(
            plain.turns.write(TurnWrite("s", None, query_messages=[user("branch")], response_messages=[reply("b")]))
        )
        assert run_inline(cached.turns.history("s")) == run_inline(plain.turns.history("s"))
        assert cached.turns.cache is not None and cached.turns.cache.size <= 50


def test_the_sqlite_stores_implement_every_protocol() -> None:
    from nexus.ledger import protocols

    with Ledger.open(":memory:") as ledger:
        stores = {"turns": ("TurnStore", "TurnTree"), "sessions": ("SessionStore", "PointerLog")}
        stores |= {"queue": ("QueueStore", "QueueFeed"), "agents": ("AgentStore",), "deliveries": ("DeliveryStore",)}
        stores |= {"pi": ("PiFiles",)}
        for attribute, names in stores.items():
            for name in names:
                assert isinstance(getattr(ledger, attribute), getattr(protocols, name)), (attribute, name)


def test_default_cache_returns_a_fresh_list_of_shared_messages(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger, Ledger.open(tmp_path / "a.db", message_cache=0) as plain:
        run_inline(ledger.sessions.create(NewSession("s")))
        run_inline(
            ledger.turns.write(
                TurnWrite("s", None, query_messages=[user("q")], response_messages=[*tool_round("c1"), reply("a")])
            )
        )
        first = run_inline(ledger.turns.history("s"))
        first.append(user("not stored"))
        second = run_inline(ledger.turns.history("s"))
        assert second is not first and second == run_inline(plain.turns.history("s")) and len(second) == 4
        assert all(a is b for a, b in zip(first, second, strict=False))  # shared, read-only by contract
        run_inline(
            ledger.turns.write(TurnWrite("s", None, query_messages=[user("q2")], response_messages=[reply("b")]))
        )
        assert (
            run_inline(ledger.turns.history("s")) == run_inline(plain.turns.history("s"))
            and len(run_inline(ledger.turns.history("s"))) == 6
        )


def test_corrupt_compact_body_is_a_clear_error_not_a_wrong_message() -> None:
    origins = {1: ("api", "prov", "model")}
    with pytest.raises(MessageFormatError, match=r"is malformed.*KeyError: 7"):
        decode_bodies(['{"c":["x"],"o":1,"t":1}', '{"c":["x"],"o":7,"t":1}'], origins)  # unknown origin id
    with pytest.raises(MessageFormatError, match="KeyError: 'n'"):
        decode_bodies(['{"i":"c1","c":["out"],"t":1}'], origins)  # tool result without a tool name
    with pytest.raises(TypeError, match="cannot store"):
        encode_body("hello", 0)  # type: ignore[arg-type]


def test_a_file_that_is_not_a_ledger_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    junk = b"these are somebody's notes, not a database\n" * 40
    path.write_bytes(junk)
    with pytest.raises(LedgerError, match="not a usable ledger database"):
        Ledger.open(path)
    assert path.read_bytes() == junk
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        Ledger.open(tmp_path)


def test_a_database_with_a_second_hard_link_is_refused_and_a_symlink_is_one_database(tmp_path: Path) -> None:
    """SQLite keeps its log beside the name it opens: through a hard link a row committed through the
    other name is not there. A symlink is resolved (one log), so it opens."""
    (tmp_path / "h1").mkdir()
    (tmp_path / "h2").mkdir()
    with Ledger.open(tmp_path / "h1" / "agents.db") as ledger:
        run_inline(ledger.sessions.ensure(NewSession("main")))
    (tmp_path / "h2" / "agents.db").symlink_to(tmp_path / "h1" / "agents.db")
    with Ledger.open(tmp_path / "h2" / "agents.db") as ledger:
        assert run_inline(ledger.sessions.get("main")) is not None
    os.link(tmp_path / "h1" / "agents.db", tmp_path / "linked.db")
    for name in ("h1/agents.db", "h2/agents.db", "linked.db"):
        with pytest.raises(LedgerError, match=r"has 2 names \(hard links\).*or use a symlink"):
            Ledger.open(tmp_path / name)


SPEC_COLUMNS: dict[str, str] = {  # reference/nexus-specs.md §1.1 (spec_* views carry the renamed/derived ones)
    "turns": "id parent_turn_id turn_type status started_at completed_at model provider role toolset_name "
    "tools_available permissions_granted permissions_used input_tokens output_tokens cached_input_tokens "
    "cache_write_tokens reasoning_tokens total_tokens has_children tool_call_count source_event_id workspace_path",
    "threads": "turn_id total_tokens depth persona_id system_prompt_hash thread_key",
    "sessions": "label thread_id persona_id is_subagent parent_session_label parent_turn_id spawn_tool_call_id "
    "task_description task_status routing_key origin origin_session_id created_at updated_at status",
    "spec_messages": "id turn_id role content source sequence created_at thinking context_json metadata_json",
    "spec_tool_calls": "id turn_id message_id tool_name tool_number params_json result_json error status "
    "spawned_session_label started_at completed_at sequence",
    "compactions": "turn_id summary summarized_through_turn_id first_kept_turn_id turns_summarized compaction_type "
    "model provider tokens_before tokens_after summary_tokens summarization_input_tokens "
    "summarization_output_tokens duration_ms trigger metadata_json",
    "session_history": "id session_label thread_id changed_at",
    "session_aliases": "alias session_label created_at reason",
    "queue_items": "id session_label message_json mode status enqueued_at started_at completed_at error",
}


def test_every_reference_column_is_there(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        conn = ledger.database.connection
        for table, columns in SPEC_COLUMNS.items():
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            assert set(columns.split()) <= have, (table, set(columns.split()) - have)


def test_spec_views_show_what_the_api_shows(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "a.db") as ledger:
        run_inline(ledger.sessions.create(NewSession("s")))
        asked = AssistantMessage(
            [ThinkingContent("plan", "sig"), TextContent("let me look"), ToolCall("c1", "read", {"path": "a"})],
            api="a",
            provider="p",
            model="m",
            stop_reason="tool_use",
        )
        result = ToolResultMessage("c1", "read", [TextContent("body")], is_error=True)
        query = UserMessage([TextContent("look "), TextContent("here")])
        turn = run_inline(
            ledger.turns.write(
                TurnWrite(
                    "s", None, query_messages=[query], response_messages=[asked, result, reply("done")], source="human"
                )
            )
        )
        conn = ledger.database.connection
        rows = conn.execute(
            "SELECT id, turn_id, role, content, source, sequence, created_at, thinking FROM spec_messages ORDER BY id"
        ).fetchall()
        stored = run_inline(ledger.turns.messages(turn))
        assert [r[0] for r in rows] == [m.id for m in stored] and {r[1] for r in rows} == {turn}
        assert [r[2:] for r in rows] == [
            ("user", "look here", "human", 0, query.timestamp, None),
            ("assistant", "let me look", None, 1, asked.timestamp, "plan"),
            ("tool", "body", None, 2, result.timestamp, None),
            ("assistant", "done", None, 3, stored[3].message.timestamp, None),
        ]
        (call,) = conn.execute(
            "SELECT id, turn_id, message_id, tool_name, tool_number, params_json, result_json, status, sequence "
            "FROM spec_tool_calls"
        ).fetchall()
        (record,) = run_inline(ledger.turns.tool_calls(turn))
        assert call[:5] == ("c1", turn, record.message_id, "read", 1)
        assert json.loads(call[5]) == {"path": "a"} and call[7:] == ("failed", 0)
        assert decode_body(call[6], {}) == result


def test_a_held_database_is_announced_waited_for_and_given_up_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 8 item 4: the wait is announced once, bounded by NEXUS_DB_WAIT_S, and ends in a clear error."""
    monkeypatch.setenv("NEXUS_DB_WAIT_S", "0.5")
    with Ledger.open(tmp_path / "a.db") as ledger:
        told: list[bool] = []
        ledger.database.on_busy = lambda: told.append(True)
        other = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(LedgerBusyError) as caught:
                run_inline(ledger.sessions.create(NewSession("s")))
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert told == [True]
        assert "locked by another process for 0.5 s" in str(caught.value) and "NEXUS_DB_WAIT_S" in str(caught.value)
        run_inline(ledger.sessions.create(NewSession("s")))  # let go: writes work again
        assert run_inline(ledger.sessions.list())[0].label == "s"


def test_wait_bound_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEXUS_DB_WAIT_S", raising=False)
    assert wait_bound() == DEFAULT_WAIT_S
    monkeypatch.setenv("NEXUS_DB_WAIT_S", "2.5")
    assert wait_bound() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("NEXUS_DB_WAIT_S", bad)
        assert wait_bound() == DEFAULT_WAIT_S


def test_a_write_that_finds_the_database_free_never_reads_the_wait_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound matters only once the database is busy; reading the environment on every write cost
    1.4 % of the broker's queue path. A busy database still waits, and still honours it."""
    import nexus.ledger._sqlite as sqlite_module

    with Ledger.open(tmp_path / "agents.db") as ledger:
        reads: list[int] = []
        real_bound = sqlite_module.wait_bound
        monkeypatch.setattr(sqlite_module, "wait_bound", lambda: reads.append(1) or real_bound())
        run_inline(ledger.sessions.ensure(NewSession("free")))
        assert reads == []
        holder = sqlite3.connect(tmp_path / "agents.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        monkeypatch.setenv("NEXUS_DB_WAIT_S", "0")
        try:
            with pytest.raises(LedgerBusyError, match="stayed locked"):
                run_inline(ledger.sessions.ensure(NewSession("busy")))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert reads == [1]


def test_ulids_of_one_millisecond_count_up_across_a_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 1,024 ids in one millisecond the last two digits carry into the 14 above: still one apart, in order;
    and the random part's top bit stays clear at every first id of a millisecond (room to count up)."""
    from nexus.ledger import _ulid

    clock = [1_764_400_000_000 * 1_000_000]
    monkeypatch.setattr(_ulid, "time", types.SimpleNamespace(time_ns=lambda: clock[0]))
    monkeypatch.setattr(_ulid, "_last_ms", -1)
    ids = [new_ulid() for _ in range(2100)]  # one millisecond: at least one carry of the last two digits
    values = [_ulid_value(i) for i in ids]
    assert ids == sorted(ids) and all(b - a == 1 for a, b in itertools.pairwise(values))
    assert {v >> 80 for v in values} == {1_764_400_000_000}
    firsts = []
    for _ in range(200):
        clock[0] += 1_000_000
        firsts.append(_ulid_value(new_ulid()))
    assert all((v >> 79) & 1 == 0 for v in firsts)  # each a new millisecond's first id: top random bit clear
    assert len({v & (2**80 - 1) for v in firsts}) == 200  # fresh random digits each millisecond
