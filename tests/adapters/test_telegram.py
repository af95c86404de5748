"""The Telegram adapter as a real process against a loopback fake of the Bot API."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from adapter_helpers import MakeManager, adapter, events_of

from nexus.adapters.builtin._telegram_format import markdown_to_html, split_message
from nexus.adapters.events import session_key
from nexus.adapters.manager import AdapterManager
from nexus.adapters.types import DeliveryTarget
from nexus.config import AdapterConfig
from nexus.streaming.events import StreamEnd, StreamError, StreamEvent, Token, ToolStatus
from nexus.streaming.router import StreamRouter
from nexus.testing import FakeTelegram, InstantClock, ManualClock
from nexus.testing.telegram import check_html

TOKEN = "123456:TEST-TOKEN"


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


def telegram(tg: FakeTelegram, **config: Any) -> AdapterConfig:
    account = {"credential": "${TG_TOKEN}", "config": {"api_base": tg.base_url, "edit_interval_ms": 60_000, **config}}
    return adapter(builtin="telegram", accounts={"bot": account})


def manager_with(make_manager: MakeManager, tg: FakeTelegram, **kwargs: Any) -> AdapterManager:
    return make_manager({"tg": telegram(tg)}, env={**os.environ, "TG_TOKEN": TOKEN}, **kwargs)


def test_markdown_becomes_telegram_html_that_parses() -> None:
    text = "# Plan\n**bold**, *it*, `a<b>` & [docs](https://x.io/?a=1&b=2)\n\n```py\nif a < b:\n    pass\n```"
    converted = markdown_to_html(text)
    assert "<b>Plan</b>" in converted and "<b>bold</b>" in converted and "<i>it</i>" in converted
    assert "<code>a&lt;b&gt;</code>" in converted
    assert '<pre><code class="language-py">if a &lt; b:' in converted
    assert check_html(converted)[0] is None


def test_long_text_is_split_into_messages_that_fit() -> None:
    code = "intro\n\n```py\n" + "value = compute(1)\n" * 400 + "```\n"
    pieces = split_message(code)
    assert len(pieces) >= 2
    for piece in pieces:
        error, visible = check_html(markdown_to_html(piece))
        assert error is None and len(visible) <= 4096
        assert piece.count("```") % 2 == 0, "a fence split across messages is closed and reopened"


async def test_send_uses_html_reply_and_thread(tg: FakeTelegram, make_manager: MakeManager) -> None:
    manager = manager_with(make_manager, tg)
    target = DeliveryTarget("tg", "bot", "chat:1001", thread_id="77", reply_to_id="5")
    result = await manager.send(target, "Hello **world**")
    assert result.success and result.message_ids == ["1"]
    [message] = tg.messages
    assert message.text == "Hello <b>world</b>" and message.parse_mode == "HTML"
    assert (message.chat_id, message.thread_id, message.reply_to) == ("1001", 77, 5)


async def test_a_long_send_continues_in_more_messages_and_replies_once(
    tg: FakeTelegram, make_manager: MakeManager
) -> None:
    manager = manager_with(make_manager, tg)
    text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum " * 40 for i in range(30))
    result = await manager.send(DeliveryTarget("tg", "bot", "chat:1", reply_to_id="9"), text)
    assert result.success and len(result.message_ids) == len(tg.messages) >= 3
    assert [m.reply_to for m in tg.messages] == [9] + [None] * (len(tg.messages) - 1)
    assert all(len(check_html(m.text)[1]) <= 4096 for m in tg.messages)
    assert " ".join(check_html(m.text)[1] for m in tg.messages).split() == text.split()


async def test_markup_refused_by_telegram_is_resent_as_plain_text(tg: FakeTelegram, make_manager: MakeManager) -> None:
    tg.reject_markup = True
    manager = manager_with(make_manager, tg)
    result = await manager.send(DeliveryTarget("tg", "bot", "chat:1"), "a **b**")
    assert result.success
    assert tg.methods() == ["sendMessage", "sendMessage"]
    assert tg.messages[0].text == "a **b**" and tg.messages[0].parse_mode is None


async def test_retry_after_is_honoured_by_the_adapter(tg: FakeTelegram, make_manager: MakeManager) -> None:
    tg.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    manager = manager_with(make_manager, tg)
    result = await manager.send(DeliveryTarget("tg", "bot", "chat:1"), "hi")
    assert result.success and tg.methods() == ["sendMessage", "sendMessage"]


async def test_a_long_retry_after_goes_back_to_nexus_which_waits(tg: FakeTelegram, make_manager: MakeManager) -> None:
    tg.fail_next("sendMessage", 429, "Too Many Requests: retry after 45", retry_after=45)
    clock = InstantClock()
    manager = manager_with(make_manager, tg, clock=clock)
    result = await manager.send(DeliveryTarget("tg", "bot", "chat:1"), "hi")
    assert result.success
    assert clock.sleeps == [30.0], "retry_after_ms 45000 honoured up to the 30 s cap"


async def test_streamed_reply_edits_one_message_and_ends_in_html(tg: FakeTelegram, make_manager: MakeManager) -> None:
    manager = manager_with(make_manager, tg)
    router = StreamRouter(manager, clock=ManualClock())
    target = DeliveryTarget("tg", "bot", "chat:1001", reply_to_id="3")
    events: list[StreamEvent] = [
        Token("Let me "),
        Token("check."),
        ToolStatus("read", "t1", "started", "Reading package.json"),
        ToolStatus("read", "t1", "completed", "Read package.json"),
        StreamEnd("r", final=False),
        Token("\n\nThe version is **2.1.0**."),
        StreamEnd("r", final=True),
    ]
    report = await router.deliver(target, events_of(events), run_id="r")
    assert report.ok and report.path == "native" and report.message_ids == ["1"]
    [message] = tg.messages
    assert message.reply_to == 3
    assert message.text == "Let me check.\n\nThe version is <b>2.1.0</b>." and message.parse_mode == "HTML"
    assert any("\u23f3 Reading package.json" in edit for edit in message.edits), message.edits
    assert tg.methods().count("sendMessage") == 1


async def test_a_tool_status_before_any_text_has_no_leading_blank_lines(
    tg: FakeTelegram, make_manager: MakeManager
) -> None:
    """The status message of a run that starts with a tool call began with two blank lines."""
    manager = manager_with(make_manager, tg)
    events: list[StreamEvent] = [
        ToolStatus("read", "t1", "started", "Reading package.json"),
        ToolStatus("read", "t1", "completed", "Read package.json"),
        StreamEnd("r", final=False),
        StreamError("provider down", False),
    ]
    report = await StreamRouter(manager, clock=ManualClock()).deliver(
        DeliveryTarget("tg", "bot", "chat:1"), events_of(events)
    )
    assert report.ok
    [message] = tg.messages
    assert message.edits[0] == "\u23f3 Reading package.json\u2026", message.edits
    assert not any(text.startswith(("\n", " ")) for text in message.edits), message.edits
    assert message.text.startswith("\u26a0\ufe0f Response interrupted: provider down"), message.text


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(6000):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 60 s")


async def test_one_chats_long_reply_does_not_hold_up_another_chats_delivery(
    tg: FakeTelegram, make_manager: MakeManager
) -> None:
    """Chat 77's reply was first sent after chat 42's stream had ended: one stream process per account."""
    manager = manager_with(make_manager, tg)
    router = StreamRouter(manager, clock=ManualClock())

    async def long_reply() -> AsyncIterator[StreamEvent]:
        yield Token("A long answer for chat 42, ")
        await _until(lambda: any(m.chat_id == "77" for m in tg.messages))  # it goes on until chat 77 is answered
        yield Token("finished after chat 77 saw its reply.")
        yield StreamEnd("r42")

    slow = asyncio.ensure_future(router.deliver(DeliveryTarget("tg", "bot", "chat:42"), long_reply()))
    await _until(lambda: bool(tg.messages))
    quick = router.deliver(DeliveryTarget("tg", "bot", "chat:77"), events_of([Token("Short."), StreamEnd("r77")]))
    reports = await asyncio.wait_for(asyncio.gather(quick, slow), timeout=60)
    assert all(report.ok for report in reports), reports
    assert [m.chat_id for m in tg.messages] == ["42", "77"]
    assert tg.messages[0].text.endswith("finished after chat 77 saw its reply.")


async def test_one_chats_deliveries_stay_in_order_on_the_pool(tg: FakeTelegram, make_manager: MakeManager) -> None:
    manager = manager_with(make_manager, tg)
    router = StreamRouter(manager, clock=ManualClock())
    target = DeliveryTarget("tg", "bot", "chat:5")
    gate = asyncio.Event()

    async def first() -> AsyncIterator[StreamEvent]:
        yield Token("first reply")
        await gate.wait()
        yield StreamEnd("a")

    one = asyncio.ensure_future(router.deliver(target, first()))
    two = asyncio.ensure_future(router.deliver(target, events_of([Token("second reply"), StreamEnd("b")])))
    await _until(lambda: bool(tg.messages))
    for _ in range(20):  # the second waits for the first, however many idle processes the pool could start
        await asyncio.sleep(0.01)
    assert [m.text for m in tg.messages] == ["first reply"] and not two.done()
    gate.set()
    assert all(report.ok for report in await asyncio.gather(one, two))
    assert [m.text for m in tg.messages] == ["first reply", "second reply"]


async def test_a_streamed_reply_past_4096_chars_continues_in_a_new_message(
    tg: FakeTelegram, make_manager: MakeManager
) -> None:
    manager = manager_with(make_manager, tg)
    router = StreamRouter(manager, clock=ManualClock())
    words = [f"word{i} " for i in range(1500)]
    report = await router.deliver(
        DeliveryTarget("tg", "bot", "chat:1"), events_of([*map(Token, words), StreamEnd("r")])
    )
    assert report.ok and len(report.message_ids) == len(tg.messages) >= 2
    assert "".join(check_html(m.text)[1] for m in tg.messages).split() == "".join(words).split()


async def test_stream_error_marks_the_message_interrupted(tg: FakeTelegram, make_manager: MakeManager) -> None:
    manager = manager_with(make_manager, tg)
    report = await StreamRouter(manager, clock=ManualClock()).deliver(
        DeliveryTarget("tg", "bot", "chat:1"), events_of([Token("partial answer"), StreamError("provider down", True)])
    )
    assert report.ok
    assert "Response interrupted: provider down" in tg.messages[0].text


async def test_monitor_turns_updates_into_nexus_events(tg: FakeTelegram, make_manager: MakeManager) -> None:
    manager = make_manager({"tg": telegram(tg, poll_timeout_s=1)}, env={**os.environ, "TG_TOKEN": TOKEN})
    tg.push_message("hi there", chat_id=42, sender_id=42)
    tg.push_message("team question", chat_id=-100, sender_id=7, chat_type="supergroup", thread_id=12)
    events = []
    async for event in manager.monitor("tg", "bot"):
        events.append(event)
        if len(events) == 2:
            break
    assert [e.content for e in events] == ["hi there", "team question"]
    assert [session_key(e) for e in events] == ["dm:telegram:42", "group:telegram:-100:thread:12"]
    assert events[0].sender_name == "Ada" and events[0].account_id == "bot"


async def test_health_reports_the_bot_or_the_refused_token(
    tg: FakeTelegram, make_manager: MakeManager, tmp_path: Path
) -> None:
    good = manager_with(make_manager, tg)
    assert (await good.health("tg", "bot")).ok
    bad = make_manager({"tg": telegram(tg)}, env={**os.environ, "TG_TOKEN": "999:wrong"}, state_dir=tmp_path / "bad")
    status = await bad.health("tg", "bot")
    assert not status.ok and "Unauthorized" in status.detail
