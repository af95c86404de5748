"""Inbound NexusEvents: schema validation with reasons, session keys, dedup, and a real monitor process."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from adapter_helpers import MakeManager, adapter

from nexus.adapters.events import EventDeduper, parse_event, reply_target, session_key
from nexus.adapters.types import ProtocolError

EXAMPLE = Path(__file__).parents[2] / "examples" / "adapters" / "outbox_adapter.py"


def event(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "event_id": "e1",
        "timestamp": 1_760_000_000_000,
        "content": "hello",
        "content_type": "text",
        "platform": "telegram",
        "account_id": "bot",
        "sender_id": "42",
        "container_id": "42",
        "container_kind": "dm",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (event(event_id=None), "event_id: Field required"),
        (event(container_kind="room"), "container_kind"),
        (event(channel="telegram"), "channel: Extra inputs are not permitted"),
        (event(peer_id="42"), "peer_id: Extra inputs are not permitted"),
        (event(timestamp="yesterday"), "timestamp"),
    ],
)
def test_a_bad_event_is_refused_with_the_reason(data: dict[str, Any], reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        parse_event(json.dumps(data))


def test_garbage_is_refused() -> None:
    with pytest.raises(ProtocolError, match="not JSON"):
        parse_event(b"hello?")


def test_session_keys() -> None:
    assert session_key(parse_event(json.dumps(event()))) == "dm:telegram:42"
    group = event(container_kind="group", container_id="-100", sender_id="7")
    assert session_key(parse_event(json.dumps(group))) == "group:telegram:-100"
    assert session_key(parse_event(json.dumps({**group, "thread_id": "9"}))) == "group:telegram:-100:thread:9"


def key_of(**changes: Any) -> str:
    return session_key(parse_event(json.dumps(event(**changes))))


def test_ids_holding_the_separator_do_not_share_a_session_key() -> None:
    """A group ``g1:thread:9`` is not group ``g1``'s thread ``9``; a platform ``a:b`` with sender ``c`` is not
    platform ``a`` with sender ``b:c``; an id that looks escaped is not the id it looks like."""
    group = {"container_kind": "group", "sender_id": "u1", "platform": "myplat"}
    assert key_of(**group, container_id="g1:thread:9") != key_of(**group, container_id="g1", thread_id="9")
    assert key_of(platform="a:b", sender_id="c") != key_of(platform="a", sender_id="b:c")
    assert key_of(**group, container_id="g1%3Athread%3A9") != key_of(**group, container_id="g1:thread:9")
    assert key_of(**group, container_id="a:thread", thread_id="x") != key_of(
        **group, container_id="a", thread_id="thread:x"
    )
    assert key_of(**group, container_id="g1:thread:9") == "group:myplat:g1%3Athread%3A9"


@pytest.mark.parametrize(
    ("changes", "key"),
    [  # ids without ":" or "%" keep the keys they always had, so their sessions keep their history
        ({"platform": "telegram", "sender_id": "42"}, "dm:telegram:42"),
        ({"platform": "slack", "container_kind": "direct", "sender_id": "U024BE7LH"}, "dm:slack:U024BE7LH"),
        ({"platform": "discord", "container_kind": "group", "container_id": "1234567890"}, "group:discord:1234567890"),
        (
            {"platform": "telegram", "container_kind": "group", "container_id": "-100123", "thread_id": "12"},
            "group:telegram:-100123:thread:12",
        ),
        # the sender and the thread id end the key: kept as they are, ":" included
        ({"platform": "matrix", "sender_id": "@alice:example.org"}, "dm:matrix:@alice:example.org"),
        (
            {"platform": "teams", "container_kind": "group", "container_id": "19abc", "thread_id": "1:2"},
            "group:teams:19abc:thread:1:2",
        ),
    ],
)
def test_the_session_key_of_a_plain_id_is_unchanged(changes: dict[str, Any], key: str) -> None:
    assert key_of(**changes) == key


def test_the_reply_goes_back_to_the_same_container_and_thread() -> None:
    data = event(container_kind="group", container_id="-100", thread_id="9", delivery_metadata={"message_id": "77"})
    target = reply_target(parse_event(json.dumps(data)), "tg")
    assert (target.channel, target.account_id, target.to, target.thread_id, target.reply_to_id) == (
        "tg",
        "bot",
        "-100",
        "9",
        "77",
    )


def test_deduper_is_bounded() -> None:
    dedup = EventDeduper(capacity=2)
    assert dedup.first_time("a") and dedup.first_time("b") and not dedup.first_time("a")
    assert dedup.first_time("c"), "c evicts b, the least recently seen"
    assert dedup.first_time("a") is False
    assert dedup.first_time("b") is True, "b was forgotten (bounded memory)"


async def test_monitor_refuses_bad_lines_and_drops_duplicates(
    tmp_path: Path, make_manager: MakeManager, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "monitor.py"
    lines = [
        json.dumps(event(event_id="e1", account_id="a")),
        "not json",
        json.dumps(event(event_id="e2", account_id="a", channel="legacy")),
        json.dumps(event(event_id="e1", account_id="a")),
        json.dumps(event(event_id="e3", account_id="other")),
        json.dumps(event(event_id="e4", account_id="a", content="second")),
    ]
    script.write_text(
        "import sys, time\n" + "".join(f"print({line!r}, flush=True)\n" for line in lines) + "time.sleep(30)\n"
    )
    import sys

    manager = make_manager({"m": adapter(command=f"{sys.executable} {script}", accounts={"a": {"monitor": True}})})
    got = []
    with caplog.at_level(logging.WARNING, logger="nexus.adapters"):
        async for item in manager.monitor("m", "a"):
            got.append(item)
            if len(got) == 2:
                break
    assert [e.event_id for e in got] == ["e1", "e4"]
    assert manager.refused == 3
    assert "Extra inputs are not permitted" in caplog.text and "for account 'other'" in caplog.text


async def test_the_example_adapter_monitors_an_inbox(tmp_path: Path, make_manager: MakeManager) -> None:
    inbox = tmp_path / "inbox.txt"
    inbox.write_text("alice: hello nexus\n")
    import sys

    config = {"inbox": str(inbox), "outbox": str(tmp_path / "out.jsonl")}
    manager = make_manager(
        {"outbox": adapter(command=f"{sys.executable} {EXAMPLE}", accounts={"me": {"config": config}})}
    )
    async for item in manager.monitor("outbox", "me"):
        assert (item.sender_id, item.content, session_key(item)) == ("alice", "hello nexus", "dm:outbox:alice")
        break
