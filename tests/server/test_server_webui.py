"""The web UI in a real headless Chromium (Debian's ``chromium`` + ``chromedriver``, driven by Selenium).

Skipped, with the reason, when Chromium cannot start here; ``NEXUS_REQUIRE_BROWSER=1`` (CI) turns
that into a failure. ``NEXUS_UI_SCREENSHOTS=DIR`` saves the screenshots docs/server.md shows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from nexus.config._server_schema import ServerConfig
from nexus.ledger import TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.llm.types import AssistantMessage, TextContent, UserMessage

from .live import LiveServer, wait_until

Live = Callable[..., LiveServer]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def _start_chromium(profile: Path) -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,800",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)  # fmt: skip
    # Both paths given: Selenium Manager (which would download a driver) is never asked.
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        driver = _start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    except (WebDriverException, OSError) as exc:
        first_line = (str(exc).splitlines() or [""])[0]
        reason = f"Chromium cannot start here ({type(exc).__name__}: {first_line}); needs apt chromium chromium-driver"
        if os.environ.get("NEXUS_REQUIRE_BROWSER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser at desktop size with a clean tab state (no token kept from an earlier test)."""
    browser.set_window_size(1280, 800)
    yield browser
    if browser.current_url.startswith("http"):
        browser.execute_script("sessionStorage.clear()")
    browser.get("about:blank")


def until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    """Wait (up to 20 s, polling) for ``condition(driver)`` to be truthy; fail naming ``what``.

    The page re-renders lists as data arrive, so an element found a moment ago may be gone:
    that counts as "not yet", like an element not found.
    """
    wait = WebDriverWait(driver, 20, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(condition, message=f"waiting for {what}")


def click(driver: Any, selector: str) -> None:
    """Click the element once it exists (retrying while the page re-renders it)."""
    until(driver, lambda d: d.find_element(By.CSS_SELECTOR, selector).click() or True, f"clicking {selector}")


def texts(driver: Any, selector: str) -> list[str]:
    """The visible text of every match, read in one step (no element can go stale in between)."""
    script = "return [...document.querySelectorAll(arguments[0])].map(n => n.innerText)"
    return list(driver.execute_script(script, selector))


def screenshot(driver: Any, name: str) -> None:
    """Save a screenshot where NEXUS_UI_SCREENSHOTS points (docs/img when refreshing the docs)."""
    target = os.environ.get("NEXUS_UI_SCREENSHOTS")
    png = driver.get_screenshot_as_png()
    assert png.startswith(b"\x89PNG")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / name).write_bytes(png)


def test_sessions_tree_turn_details_and_fork(live: Live, page: Any) -> None:
    server = live()
    page.get(server.url + "/")
    until(page, lambda d: "main" in texts(d, "#sessions .label"), "the sessions list")
    click(page, '#sessions button[data-session="main"]')
    until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".turn-node")) == 3, "the turn tree")
    assert [t.split("\n")[1] for t in texts(page, ".turn-node")] == ["question 0", "question 1", "question 2"]
    second = run_inline(server.ledger.turns.path("main"))[1]
    click(page, f'.turn-node[data-turn="{second.id}"]')
    until(page, lambda d: "Turn #2" in d.find_element(By.ID, "turn").text, "the turn's details")
    detail = page.find_element(By.ID, "turn").text
    assert "question 1" in detail and "answer 1" in detail and "read" in detail  # messages and the tool call
    assert "122" in detail and "$0.0013" in detail  # total tokens and cost
    screenshot(page, "ui-turn.png")
    page.find_element(By.ID, "fork-label").send_keys("alt")
    click(page, "#fork-here")
    until(page, lambda d: "alt" in texts(d, "#sessions .label"), "the forked session in the list")
    until(page, lambda d: d.find_element(By.ID, "tree-title").text == "alt", "the forked session selected")
    assert run_inline(server.ledger.sessions.get("alt")).thread_id == second.id
    assert "Forked into session" in page.find_element(By.ID, "notice").text
    until(page, lambda d: any("alt" in t for t in texts(d, ".turn-node .tag")), "the fork's label in the tree")
    reply = AssistantMessage(content=[TextContent("another answer")], provider="openai", model="gpt-4o-mini")
    run_inline(
        server.ledger.turns.write(
            TurnWrite("alt", None, query_messages=[UserMessage("another way")], response_messages=[reply])
        )
    )
    click(page, '#sessions button[data-session="alt"]')
    until(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".branch")) == 2, "the two branches after turn #2")

    def both_branches_shown(driver: Any) -> bool:  # a branch's text can arrive after the branch itself
        branches = texts(driver, ".branch")
        return any("another way" in b for b in branches) and any("question 2" in b for b in branches)

    until(page, both_branches_shown, "the fork's turn and the original's turn in their branches")
    screenshot(page, "ui-fork.png")


def test_chat_pane_streams_tokens_and_tool_status_live(live: Live, page: Any) -> None:
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    page.get(server.url + "/#s=main")
    until(page, lambda d: d.find_element(By.ID, "live").text == "live", "the SSE stream")
    wait_until(lambda: server.hub.subscriber_count >= 1, "the browser's subscription")
    publish = server.hub.publish
    publish("main", "stream_start", {"runId": "r1", "sessionLabel": "main", "target": {"channel": "web"}})
    publish("main", "reasoning", {"text": "The user wants the README."})
    for token in ("Reading", " the", " README", "…"):
        publish("main", "token", {"text": token})
    publish(
        "main",
        "tool_status",
        {"toolName": "read", "toolCallId": "c1", "status": "started", "summary": "Read README.md"},
    )
    until(page, lambda d: "Reading the README…" in d.find_element(By.CSS_SELECTOR, ".msg.live").text, "tokens")
    until(page, lambda d: "… read — Read README.md" in texts(d, ".msg.live .tool"), "the tool starting")
    assert texts(page, ".msg.live .reasoning") == ["The user wants the README."]
    publish(
        "main",
        "tool_status",
        {"toolName": "read", "toolCallId": "c1", "status": "completed", "summary": "Read README.md"},
    )
    publish("main", "stream_end", {"runId": "r1", "final": False})
    publish("main", "token", {"text": " Done."})
    until(page, lambda d: "✓ read — Read README.md" in texts(d, ".msg.live .tool"), "the tool finishing")
    until(
        page, lambda d: "Reading the README… Done." in d.find_element(By.CSS_SELECTOR, ".msg.live").text, "more tokens"
    )
    screenshot(page, "ui-chat-live.png")
    publish("main", "token", {"text": " <b>not bold</b><img src=x onerror=alert(1)>"})
    until(page, lambda d: "<b>not bold</b>" in d.find_element(By.CSS_SELECTOR, ".msg.live").text, "markup as text")
    assert not page.find_elements(By.CSS_SELECTOR, ".msg.live b, .msg.live img")  # shown, never parsed
    publish("main", "stream_end", {"runId": "r1", "final": True})
    until(page, lambda d: not d.find_elements(By.CSS_SELECTOR, ".msg.live"), "the run to end")
    publish("main", "stream_start", {"runId": "r2", "sessionLabel": "main", "target": {"channel": "web"}})
    publish("main", "token", {"text": "Half an ans"})
    publish("main", "stream_error", {"error": "rate limited (429)", "partial": True})
    until(page, lambda d: "Run failed: rate limited (429)" in texts(d, ".msg .error"), "the failed run")
    assert any("Half an ans" in t for t in texts(page, ".msg.assistant"))  # the partial text stays


def test_send_queues_durably_and_abort_says_why_it_cannot(live: Live, page: Any) -> None:
    server = live()  # an API process with no broker of its own: messages are queued for the one that drains
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    page.get(server.url + "/#s=main")
    until(page, lambda d: d.find_element(By.ID, "send").is_enabled(), "the composer for agent coder")
    page.find_element(By.ID, "text").send_keys("hello there")
    click(page, "#send")
    notice = until(page, lambda d: d.find_element(By.ID, "notice").text, "the send notice")
    (item,) = server.store.items(agent_id="coder")
    assert notice == f"Queued as {item.id}." and item.status == "queued"
    assert item.message["content"] == "hello there"
    assert page.find_element(By.ID, "text").get_attribute("value") == ""
    click(page, "#abort")
    until(page, lambda d: "Could not abort runs: no broker runs in this server process" in d.find_element(
        By.ID, "notice").text, "abort")  # fmt: skip


def test_the_page_asks_for_the_token_once_and_keeps_it_for_the_tab(live: Live, page: Any) -> None:
    server = live(ServerConfig(tokens=["s3cret"]))
    page.get(server.url + "/")
    until(page, lambda d: d.find_element(By.ID, "token-dialog").is_displayed(), "the token prompt")
    page.find_element(By.ID, "token-input").send_keys("s3cret")
    click(page, "#token-save")
    until(page, lambda d: "main" in texts(d, "#sessions .label"), "the sessions after the token")
    assert page.execute_script("return sessionStorage.getItem('nexus-token')") == "s3cret"
    page.refresh()
    until(page, lambda d: "main" in texts(d, "#sessions .label"), "the sessions after a reload")
    assert not page.find_element(By.ID, "token-dialog").is_displayed()


def test_a_token_in_the_address_is_taken_and_removed_from_it(live: Live, page: Any) -> None:
    """``nexus serve`` prints ``http://…/#token=…`` when it made the token itself (``require_token``)."""
    server = live(ServerConfig(tokens=["s3cret"]))
    page.get(server.url + "/#token=s3cret")
    until(page, lambda d: "main" in texts(d, "#sessions .label"), "the sessions, no prompt")
    assert not page.find_element(By.ID, "token-dialog").is_displayed()
    assert page.execute_script("return sessionStorage.getItem('nexus-token')") == "s3cret"
    assert "token" not in page.current_url  # not left in the address bar, the history or a bookmark


def test_phone_width_shows_one_pane_at_a_time(live: Live, page: Any) -> None:
    server = live()
    page.set_window_size(390, 844)
    page.get(server.url + "/")
    until(page, lambda d: "main" in texts(d, "#sessions .label"), "the sessions list")
    assert page.find_element(By.ID, "pane-sessions").is_displayed()
    assert not page.find_element(By.ID, "pane-chat").is_displayed()
    screenshot(page, "ui-phone-sessions.png")
    click(page, '#sessions button[data-session="main"]')
    until(page, lambda d: d.find_element(By.ID, "pane-tree").is_displayed(), "the tree pane")
    click(page, '.views button[data-show="chat"]')
    until(page, lambda d: d.find_element(By.ID, "pane-chat").is_displayed(), "the chat pane")
    assert not page.find_element(By.ID, "pane-tree").is_displayed()
    width = page.execute_script("return document.documentElement.scrollWidth")
    assert width <= 390, "nothing overflows the phone's width"
    screenshot(page, "ui-phone-chat.png")


def test_the_page_is_served_without_a_token_and_with_a_strict_csp(live: Live) -> None:
    import httpx

    server = live(ServerConfig(tokens=["s3cret"]))
    with httpx.Client(base_url=server.url, timeout=10) as client:
        index = client.get("/")
        assert index.status_code == 200 and "script-src 'self'" in index.headers["content-security-policy"]
        assert client.get("/ui/app.js").status_code == 200 and client.get("/ui/app.css").status_code == 200
        assert client.get("/ui/../v1/sessions").status_code in (401, 404)
        assert client.get("/v1/sessions").status_code == 401
        for path in ("/ui/index.html", "/ui/app.js"):  # the same page under another path: the same policy
            also = client.get(path)
            assert (
                also.status_code == 200
                and also.headers["content-security-policy"] == index.headers["content-security-policy"]
            ), path
            assert "frame-ancestors 'none'" in also.headers["content-security-policy"]
            assert also.headers["x-content-type-options"] == "nosniff"
        head = client.head("/")
        assert head.status_code == 200 and head.content == b"" and "content-security-policy" in head.headers
