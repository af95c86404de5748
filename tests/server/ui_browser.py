"""Playwright (the PyPI package) driving Debian's Chromium for the web UI tests.

No browser is downloaded: ``executable_path`` points at the system's ``chromium`` (``NEXUS_CHROMIUM``
overrides it). When Playwright or Chromium is missing the tests skip with the reason;
``NEXUS_REQUIRE_BROWSER=1`` (CI) makes that a failure. ``NEXUS_UI_SCREENSHOTS=DIR`` saves the
screenshots docs/server.md shows (``NEXUS_UI_SCREENSHOTS=docs/img``).

Every page fails its test on an uncaught script error or a Content-Security-Policy violation.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str:
    return os.environ.get("NEXUS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def _unavailable(reason: str) -> None:
    if os.environ.get("NEXUS_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Chromium per test module (a fresh context per test keeps them apart)."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}); pip install 'nexus-broker[dev]'")
    runner = sync_playwright().start()
    try:
        browser = runner.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_FLAGS))
    except Error as exc:
        runner.stop()
        first = (str(exc).splitlines() or [""])[0]
        _unavailable(f"Chromium cannot start here ({first}); needs Debian's chromium (apt install chromium)")
    try:
        yield browser
    finally:
        browser.close()
        runner.stop()


class PageProblems:
    """Uncaught script errors and CSP violations a page reported."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"script error: {error}"))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.errors.append(f"CSP: {message.text}")


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A desktop-sized page in a fresh context (no token kept from another test), clipboard allowed."""
    context = chromium.new_context(viewport=DESKTOP, permissions=["clipboard-read", "clipboard-write"])
    context.set_default_timeout(20_000)
    tab = context.new_page()
    problems = PageProblems(tab)
    try:
        yield tab
    finally:
        context.close()
    assert not problems.errors, problems.errors


def screenshot(page: Any, name: str) -> None:
    """Save a screenshot where NEXUS_UI_SCREENSHOTS points (docs/img when refreshing the docs)."""
    png = page.screenshot()
    assert png.startswith(b"\x89PNG")
    target = os.environ.get("NEXUS_UI_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / name).write_bytes(png)


def texts(page: Any, selector: str) -> list[str]:
    """The visible text of every match, read in one step."""
    return list(page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.innerText)"))


def scroll_state(page: Any) -> dict[str, float]:
    """The chat's scroll position: how far from the bottom it is, in pixels."""
    script = "() => { const b = document.getElementById('messages');"
    script += " return {top: b.scrollTop, gap: b.scrollHeight - b.scrollTop - b.clientHeight}; }"
    state: dict[str, float] = page.evaluate(script)
    return state
