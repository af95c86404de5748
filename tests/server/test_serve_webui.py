"""The web UI against a real ``nexus serve`` (its broker runs the turns on a fake provider), in Chromium:
a new chat streams a Markdown reply; a fork is continued by its agent; a stopped reply is a stop; a
manager's message to a worker shows with the worker's answer. ``NEXUS_UI_SCREENSHOTS`` saves ``ui-chat.png``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall, text

from .serve_proc import nexus, serving, write_config
from .ui_browser import screenshot

try:
    from playwright.sync_api import expect
except ImportError:  # the chromium fixture says why (and fails when NEXUS_REQUIRE_BROWSER=1)
    expect = None

pytestmark = pytest.mark.slow  # a real server process and a browser

REPLY = "Here is the fix:\n\n```python\nprint('hi')\n```\n\nRun it with `python fix.py`."


def _chat(page: Any, words: str) -> None:
    page.fill("#text", words)
    page.click("#send")


def test_a_new_chat_streams_markdown_and_a_fork_of_it_goes_on_with_its_agent(
    isolated_env: Path, chromium: Any, page: Any
) -> None:
    docs = text("Docs updated: **README.md** now lists the steps.")
    with FakeProviderServer(text(REPLY), docs, default=echo, chunk_chars=6, chunk_delay=0.01) as provider:
        write_config(isolated_env, provider)
        assert nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with serving(isolated_env) as (_, url):
            page.goto(url + "/")
            expect(page.locator("#new-chat-agent")).to_have_value("coder")
            page.click("#new-chat")
            expect(page.locator("#chat-agent")).to_have_text("coder · web")
            _chat(page, "fix it")
            expect(page.locator("#chat-title")).to_have_text("fix it")  # a new chat is named by its first message
            group = page.locator("#messages section.turn-group")
            expect(group).to_have_count(1, timeout=30_000)
            expect(group.locator(".msg.user")).to_contain_text("fix it")
            expect(group.locator(".msg.user")).not_to_contain_text("Event context")
            expect(group.locator(".code pre code")).to_have_text("print('hi')\n")
            expect(group.locator(".turn-foot .tok")).to_be_visible()
            expect(page.locator("#messages .pending-msg")).to_have_count(0)
            _chat(page, "and the docs")
            expect(group).to_have_count(2, timeout=30_000)
            screenshot(page, "ui-chat.png")
            first = page.locator("#tree .turn-node").first
            first.locator(".node").click()
            page.fill("#fork-title", "Try B")
            page.click("#fork-here")
            expect(page.locator("#chat-title")).to_have_text("Try B")
            _chat(page, "another way")
            expect(page.locator("#messages section.turn-group")).to_have_count(2, timeout=30_000)
            expect(page.locator("#messages section.turn-group").last).to_contain_text("another way")
            expect(page.locator("#tree .branch")).to_have_count(2)


def test_a_stopped_reply_is_a_stop_and_a_workers_answer_shows_beside_the_ask(
    isolated_env: Path, chromium: Any, page: Any
) -> None:
    slow = stall(after_chunks=4, seconds=60, then=text("a long answer that never ends in time"))
    with FakeProviderServer(slow, default=echo, chunk_chars=3) as provider:
        write_config(isolated_env, provider)
        for agent in ("coder", "lead"):
            assert nexus(isolated_env, "agents", "add", agent).returncode == 0
        with serving(isolated_env) as (_, url):
            page.goto(f"{url}/#s=agent:coder")
            expect(page.locator("#send")).to_be_enabled()
            _chat(page, "long job")
            expect(page.locator(".msg.live")).to_contain_text("a lo", timeout=30_000)
            page.click("#stop")
            expect(page.locator(".msg .stopped").first).to_contain_text("Stopped", timeout=30_000)
            stopped = page.locator("#messages section.turn-group.aborted")
            expect(stopped.locator(".tag.aborted")).to_have_text("stopped", timeout=30_000)
            assert page.locator("#messages .error").count() == 0, "a stop is not a failure"
            sent = httpx.post(f"{url}/v1/agents/coder/messages", json={"content": "run the tests", "from": "lead"})
            assert sent.status_code == 202, sent.text
            page.click("#show-talk")
            card = page.locator(".talk").first
            expect(card.locator("header")).to_contain_text("lead → coder")
            page.wait_for_timeout(300)
            for _ in range(60):  # the worker's turn runs in the server: refresh until its answer shows
                page.click("#talk-refresh")
                if page.locator(".talk .reply").count():
                    break
                page.wait_for_timeout(250)
            expect(card.locator(".reply summary")).to_contain_text("[Message from lead]")  # the echo model repeats it


def test_stop_stops_a_chat_completion_the_agent_runs_in_another_session(
    isolated_env: Path, chromium: Any, page: Any
) -> None:
    """A chat completion with ``X-Nexus-Session`` runs beside the agent's queues; the page's Stop was disabled
    there (it takes no messages from the page), so a turn an OpenAI client left could not be stopped from it."""
    slow = stall(after_chunks=4, seconds=60, then=text("a long answer that never ends in time"))
    with FakeProviderServer(slow, default=echo, chunk_chars=3) as provider:
        write_config(isolated_env, provider)
        assert nexus(isolated_env, "agents", "add", "coder").returncode == 0
        with serving(isolated_env) as (_, url), ThreadPoolExecutor(1) as pool:
            body = {"model": "coder", "messages": [{"role": "user", "content": "long job"}]}
            asked = pool.submit(
                httpx.post, f"{url}/v1/chat/completions", json=body, headers={"X-Nexus-Session": "proj-x"}, timeout=90
            )
            for _ in range(200):  # the session exists once the run has started
                if httpx.get(f"{url}/v1/agents/coder").json().get("state") == "streaming":
                    break
                page.wait_for_timeout(100)
            page.goto(f"{url}/#s=proj-x")
            expect(page.locator("#stop")).to_be_enabled()
            page.click("#stop")
            answer = asked.result(timeout=60)
    assert answer.status_code == 409 and answer.json()["error"]["type"] == "aborted", answer.text
