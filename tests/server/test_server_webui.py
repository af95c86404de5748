"""The web UI in a real Chromium (Playwright driving Debian's ``chromium``), against a real server over a
real ledger. This server has no broker of its own (messages wait in the durable queue; live events are
published into its event hub as the broker's runs would be); ``test_serve_webui.py`` drives a real
``nexus serve``. Every page also fails its test on a script error or a CSP violation (``ui_browser``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nexus.config._server_schema import ServerConfig
from nexus.ledger import NewSession, SessionQuery, TurnWrite
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import AcceptRequest
from nexus.llm.types import AssistantMessage, TextContent, UserMessage

from .live import LiveServer, wait_until
from .ui_browser import screenshot, scroll_state, texts

try:
    from playwright.sync_api import expect
except ImportError:  # the chromium fixture says why (and fails when NEXUS_REQUIRE_BROWSER=1)
    expect = None

Live = Callable[..., LiveServer]


def _reply(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text)], provider="openai", model="gpt-4o-mini")


def _open(page: Any, server: LiveServer, label: str = "main") -> None:
    page.goto(f"{server.url}/#s={label}")
    expect(page.locator("#live")).to_have_text("live")


def _publish(server: LiveServer, label: str, *events: tuple[str, dict[str, Any]]) -> None:
    wait_until(lambda: server.hub.subscriber_count >= 1, "the browser's subscription")
    for event_type, data in events:
        server.hub.publish(label, event_type, data)


def _start(run: str = "r1", label: str = "main") -> tuple[str, dict[str, Any]]:
    return "stream_start", {"runId": run, "sessionLabel": label, "target": {"channel": "web"}}


def test_the_tree_the_turn_detail_and_what_the_user_wrote(live: Live, page: Any) -> None:
    server = live()
    page.goto(server.url + "/")
    page.click('#sessions button[data-session="main"]')
    expect(page.locator("#tree .turn-node")).to_have_count(3)
    assert texts(page, "#tree .turn-node .preview") == ["question 0", "question 1", "question 2"]
    expect(page.locator("#messages .msg.user")).to_have_count(3)
    assert "Event context" not in page.inner_text("#messages"), "bubbles show what the user wrote"
    assert page.locator("#messages time.stamp").count() >= 6, "every message has its time"
    second = run_inline(server.ledger.turns.path("main"))[1]
    page.click(f'.turn-node[data-turn="{second.id}"] .node')
    detail = page.locator("#turn")
    expect(detail).to_contain_text("Turn #2")
    shown = detail.inner_text()
    assert "122" in shown and "$0.0013" in shown and "gpt-4o-mini" in shown  # tokens, cost, model
    assert "null" not in shown, "no stray null at the end of the detail"
    page.click("#turn .event-context summary")
    expect(page.locator("#turn .event-context pre")).to_contain_text("Channel: web")
    call = page.locator('#turn details.tool[data-call="call_1"]')
    expect(call.locator("pre.tool-args")).to_be_hidden()
    call.locator("summary").click()
    expect(call.locator("pre.tool-args")).to_contain_text('"path": "README.md"')
    expect(call.locator("pre.tool-result")).to_contain_text("# hi")
    screenshot(page, "ui-turn.png")


def test_a_fork_keeps_its_agent_and_the_chat_goes_on_in_it(live: Live, page: Any) -> None:
    """ "Fork here" led to a session with no agent ("register one with POST /v1/agents")."""
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    _open(page, server)
    expect(page.locator("#agents button.agent.current")).to_have_attribute("data-agent", "coder")
    second = run_inline(server.ledger.turns.path("main"))[1]
    page.click(f'.turn-node[data-turn="{second.id}"] .node')
    expect(page.locator("#fork-agent")).to_have_value("coder")
    page.fill("#fork-title", "Try B")
    page.click("#fork-here")
    expect(page.locator("#chat-title")).to_have_text("Try B")
    (forked,) = [s for s in run_inline(server.ledger.sessions.list()) if s.origin == "fork"]
    assert forked.thread_id == second.id and forked.metadata and forked.metadata["agent"] == "coder"
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#agents button.agent.current")).to_have_attribute("data-agent", "coder")
    page.fill("#text", "another way")
    page.click("#send")
    expect(page.locator("#messages .pending-msg")).to_contain_text("another way")
    (item,) = server.store.items(agent_id="coder")
    assert item.session_label == forked.label, "the message waits in the fork's own queue"
    run_inline(
        server.ledger.turns.write(
            TurnWrite(
                forked.label,
                None,
                query_messages=[UserMessage("another way")],
                response_messages=[_reply("another answer")],
            )
        )
    )
    page.click(f'#sessions button[data-session="{forked.label}"]')
    expect(page.locator("#tree .branch")).to_have_count(2)
    expect(page.locator("#tree .turn-node.head")).to_contain_text("another way")
    fork_point = page.locator(f'.turn-node[data-turn="{second.id}"]')
    expect(fork_point.locator(".fork-count")).to_have_text("2 branches")
    screenshot(page, "ui-fork.png")
    page.click('#tree button.session-tag[data-open="main"]')  # the other branch's head opens its session
    expect(page.locator("#chat-title")).to_have_text("main")


def test_a_session_no_agent_runs_is_continued_in_a_fork_with_a_picked_agent(live: Live, page: Any) -> None:
    server = live()
    server.store.save_agent("helper", role="worker", session_label="agent:helper", spec={})
    _open(page, server)
    expect(page.locator("#continue")).to_be_visible()
    expect(page.locator("#continue-why")).to_contain_text("No agent works on this session")
    expect(page.locator("#send")).to_be_disabled()
    page.click("#continue-go")
    expect(page.locator("#send")).to_be_enabled()
    (forked,) = [s for s in run_inline(server.ledger.sessions.list()) if s.origin == "fork"]
    assert forked.thread_id == run_inline(server.ledger.sessions.get("main")).thread_id
    assert forked.metadata and forked.metadata["agent"] == "helper"
    expect(page.locator("#chat-agent")).to_have_text("helper · web")


def test_a_streamed_reply_is_markdown_rendered_safely_and_the_chat_follows_it(live: Live, page: Any) -> None:
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    _open(page, server)
    markdown = "Here is **the fix**:\n\n```python\nprint('hi')\n```\n"
    _publish(server, "main", _start(), ("reasoning", {"text": "The user wants a fix."}),
             *[("token", {"text": markdown[i:i + 7]}) for i in range(0, len(markdown), 7)])  # fmt: skip
    live_bubble = page.locator(".msg.live")
    expect(live_bubble.locator("strong")).to_have_text("the fix")
    expect(live_bubble.locator(".code pre code")).to_have_text("print('hi')\n")
    expect(live_bubble.locator(".code .lang")).to_have_text("python")
    live_bubble.locator(".code button.copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print('hi')\n"
    _publish(server, "main", ("tool_status", {"toolName": "read", "toolCallId": "c1", "status": "started",
                                              "summary": "Read README.md"}))  # fmt: skip
    expect(live_bubble.locator(".live-tool")).to_have_text("… read — Read README.md")
    done = {"toolName": "read", "toolCallId": "c1", "status": "completed", "summary": "Read README.md"}
    _publish(server, "main", ("tool_status", done), ("stream_end", {"runId": "r1", "final": False}))
    expect(live_bubble.locator(".live-tool")).to_have_text("✓ read — Read README.md")
    screenshot(page, "ui-chat-live.png")
    hostile = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2> [click](javascript:window.pwned=3)"
    _publish(server, "main", ("token", {"text": "\n\n" + hostile + "\n\n"}))
    expect(live_bubble).to_contain_text("<script>window.pwned=1</script>")  # shown as text, never run
    assert live_bubble.locator("script, img, a[href^='javascript']").count() == 0
    assert page.evaluate("window.pwned") is None
    for n in range(40):  # a long reply: the chat keeps its bottom in view
        _publish(server, "main", ("token", {"text": f"line {n}\n\n"}))
    expect(live_bubble).to_contain_text("line 39")
    wait_until(lambda: scroll_state(page)["gap"] < 48, "the chat to follow the reply")
    page.hover("#messages")
    page.mouse.wheel(0, -600)  # the reader scrolls up: following stops
    wait_until(lambda: scroll_state(page)["gap"] > 200, "the scroll up")
    top = scroll_state(page)["top"]
    _publish(server, "main", *[("token", {"text": f"more {n}\n\n"}) for n in range(10)])
    expect(live_bubble).to_contain_text("more 9")
    expect(page.locator("#jump")).to_be_visible()
    assert scroll_state(page)["top"] == top, "what the reader looks at stays put"
    page.click("#jump")
    wait_until(lambda: scroll_state(page)["gap"] < 48, "the jump to the latest")
    expect(page.locator("#jump")).to_be_hidden()
    _publish(server, "main", ("stream_end", {"runId": "r1", "final": True}))
    expect(page.locator(".msg.live")).to_have_count(0)


def test_a_stop_shows_as_stopped_and_a_failure_as_a_failure(live: Live, page: Any) -> None:
    """A user's abort was shown in red as "Run failed: aborted on request"."""
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    _open(page, server)
    _publish(server, "main", _start(), ("token", {"text": "Half an ans"}),
             ("stream_error", {"error": "aborted on request", "partial": True}))  # fmt: skip
    expect(page.locator(".msg .stopped")).to_have_text("Stopped: aborted on request")
    assert page.locator(".msg .error").count() == 0
    _publish(server, "main", _start("r2"), ("token", {"text": "Another"}),
             ("stream_error", {"error": "rate limited (429)", "partial": True}))  # fmt: skip
    expect(page.locator(".msg .error")).to_have_text("Run failed: rate limited (429)")
    _publish(server, "main", _start("r3"), ("stream_error", {"error": "interrupted by message m-9", "partial": False}))
    expect(page.locator(".msg .stopped").last).to_have_text("Stopped: interrupted by message m-9")
    page.click("#stop")  # this server has no broker: it says so, and nothing is lost
    expect(page.locator("#notice")).to_contain_text("no broker runs in this server process")


def test_a_run_that_ends_before_the_history_arrives_stays_on_screen(live: Live, page: Any) -> None:
    """A run whose events came while the page still loaded the session's history vanished when the
    history arrived: the page took its newest turn for the run's reply (a flaky CI failure under load)."""
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    held: list[Any] = []
    page.route("**/v1/sessions/main/history", lambda route: held.append(route))
    page.goto(f"{server.url}/#s=main")
    expect(page.locator("#live")).to_have_text("live")
    for _ in range(500):  # route handlers run while Playwright waits
        if held:
            break
        page.wait_for_timeout(20)
    assert held, "the page never asked for the session's history"
    _publish(server, "main", _start(), ("token", {"text": "Half"}),
             ("stream_error", {"error": "rate limited (429)", "partial": True}))  # fmt: skip
    page.wait_for_timeout(400)  # the events reach the page before its history does
    for request in held:
        request.continue_()
    page.unroute("**/v1/sessions/main/history")
    expect(page.locator("#messages .turn-group")).to_have_count(3)
    expect(page.locator(".msg .error")).to_have_text("Run failed: rate limited (429)")
    page.wait_for_timeout(400)  # the reload after the run's end finds no turn of it: the reply stays
    expect(page.locator(".msg .error")).to_have_text("Run failed: rate limited (429)")


def test_a_sent_message_shows_as_queued_then_started_with_no_raw_id(live: Live, page: Any) -> None:
    """A started message still said "you · queued"; the notice "Queued as 01M8…" stayed on screen."""
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    _open(page, server)
    page.select_option("#mode", "collect")
    page.fill("#text", "hello there")
    page.click("#send")
    pending = page.locator("#messages .pending-msg")
    expect(pending).to_contain_text("you · queued")
    (item,) = server.store.items(agent_id="coder")
    assert (item.message["content"], item.mode, item.status) == ("hello there", "collect", "queued")
    expect(page.locator("#text")).to_have_value("")
    assert item.id not in page.inner_text("body") and page.locator("#notice").is_hidden()
    server.store.claim([item.id])  # a run takes it
    _publish(server, "main", _start())
    expect(pending).not_to_contain_text("queued")
    expect(pending).to_contain_text("hello there")


def test_sessions_are_renamed_deleted_restored_and_searched(live: Live, page: Any) -> None:
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    run_inline(
        server.ledger.sessions.create(
            NewSession("scratch-notes-from-a-very-long-session-label-that-must-stay-readable")
        )
    )
    _open(page, server)
    expect(page.locator('#sessions button[data-session="main"] .meta')).to_contain_text("coder · agent")
    page.click("#rename-session")
    page.fill("#rename-input", "Main work")
    page.click("#rename-save")
    expect(page.locator("#chat-title")).to_have_text("Main work")
    expect(page.locator('#sessions button[data-session="main"] .label')).to_have_text("Main work")
    assert run_inline(server.ledger.sessions.get("main")).metadata == {"title": "Main work"}
    page.fill("#session-search", "scratch")
    expect(page.locator("#sessions button.session")).to_have_count(1)
    long_label = page.locator("#sessions button.session .label")
    assert long_label.bounding_box()["height"] > 20, "a long label wraps instead of being cut"  # type: ignore[index]
    page.fill("#session-search", "")
    expect(page.locator("#sessions button.session")).to_have_count(2)
    page.click('#sessions button[data-session^="scratch"]')
    page.click("#archive-session")
    expect(page.locator("#sessions button.session")).to_have_count(1)
    assert run_inline(server.ledger.sessions.list(SessionQuery(status="archived")))[0].label.startswith("scratch")
    page.check("#show-archived")
    page.click('#sessions button[data-session^="scratch"]')
    page.click("#restore-session")
    expect(page.locator("#notice")).to_contain_text("restored")
    assert not run_inline(server.ledger.sessions.list(SessionQuery(status="archived")))


def test_an_agent_is_created_and_edited_in_a_form(live: Live, page: Any) -> None:
    server = live()
    page.goto(server.url + "/")
    page.click("#new-agent")
    page.fill("#agent-id", "reviewer")
    page.select_option("#agent-role", "manager")
    page.fill("#agent-model", "openai/gpt-4o-mini")
    page.uncheck("#agent-tools-all")
    page.check('#agent-tools input[value="read"]')
    page.check('#agent-tools input[value="grep"]')
    page.fill("#agent-instructions", "Review diffs; be brief.")
    screenshot(page, "ui-agent.png")
    page.click("#agent-save")
    expect(page.locator('#agents button[data-agent="reviewer"]')).to_be_visible()
    row = server.store.get_agent("reviewer")
    assert row is not None and row.role == "manager"
    assert row.spec == {
        "model": "openai/gpt-4o-mini",
        "tools": ["read", "grep"],
        "system_prompt": "Review diffs; be brief.",
    }
    page.click('button.edit[data-edit="reviewer"]')
    expect(page.locator("#agent-model")).to_have_value("openai/gpt-4o-mini")
    expect(page.locator('#agent-tools input[value="grep"]')).to_be_checked()
    page.fill("#agent-model", "nope")
    page.click("#agent-save")
    expect(page.locator("#agent-error")).to_contain_text("provider/model")
    page.fill("#agent-model", "")
    page.check("#agent-tools-all")
    page.click("#agent-save")
    expect(page.locator("#agent-dialog")).to_be_hidden()
    edited = server.store.get_agent("reviewer")
    assert edited is not None and edited.spec == {"system_prompt": "Review diffs; be brief."}


def test_agent_to_agent_messages_are_a_view_with_their_replies(live: Live, page: Any) -> None:
    server = live()
    for agent in ("lead", "coder"):
        server.store.save_agent(agent, role="worker", session_label=f"agent:{agent}", spec={})
        run_inline(server.ledger.sessions.ensure(NewSession(f"agent:{agent}")))
    ask = AcceptRequest("coder", "agent:coder", "ask-1", "lead", {"content": "run the tests"}, "followup", True)
    ((item, _),) = server.store.accept_many([ask])
    server.store.claim([item.id])
    run_inline(
        server.ledger.turns.write(
            TurnWrite(
                "agent:coder",
                None,
                query_messages=[UserMessage("run the tests")],
                response_messages=[_reply("12 passed")],
                consumed_queue_items=[item.id],
            )
        )
    )
    page.goto(server.url + "/")
    page.click("#show-talk")
    card = page.locator('.talk[data-message="ask-1"]')
    expect(card.locator("header")).to_contain_text("lead → coder")
    expect(card).to_contain_text("run the tests")
    expect(card.locator(".reply summary")).to_have_text("reply: 12 passed")
    screenshot(page, "ui-agent-messages.png")
    card.locator("button.session-tag").click()
    expect(page.locator("#chat-title")).to_have_text("agent:coder")


def test_the_tree_search_dims_what_does_not_match(live: Live, page: Any) -> None:
    server = live()
    _open(page, server)
    expect(page.locator("#tree .turn-node")).to_have_count(3)
    page.fill("#tree-search", "question 1")
    expect(page.locator("#tree-count")).to_have_text("1 match")
    expect(page.locator("#tree .turn-node.dim")).to_have_count(2)
    page.press("#tree-search", "Enter")
    expect(page.locator("#turn")).to_contain_text("Turn #2")


def test_regenerate_asks_again_on_a_branch_beside_the_turn(live: Live, page: Any) -> None:
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    _open(page, server)
    first, second, _ = run_inline(server.ledger.turns.path("main"))
    page.locator(f'section.turn-group[data-turn="{second.id}"] button.regenerate').click()
    expect(page.locator("#chat-title")).to_have_text("Regenerated: question 1")
    expect(page.locator("#messages .pending-msg")).to_contain_text("question 1")
    (forked,) = [s for s in run_inline(server.ledger.sessions.list()) if s.origin == "fork"]
    assert forked.thread_id == first.id, "the branch starts before the regenerated turn"
    (item,) = server.store.items(agent_id="coder")
    assert (item.session_label, item.message["content"]) == (forked.label, "question 1")  # no event-context header
    page.locator(f'section.turn-group[data-turn="{first.id}"] button.copy').click()
    assert page.evaluate("navigator.clipboard.readText()") == "answer 0"


def test_the_page_asks_for_the_token_once_and_keeps_it_for_the_tab(live: Live, page: Any) -> None:
    server = live(ServerConfig(tokens=["s3cret"]))
    page.goto(server.url + "/")
    expect(page.locator("#token-dialog")).to_be_visible()
    page.fill("#token-input", "s3cret")
    page.click("#token-save")
    expect(page.locator('#sessions button[data-session="main"]')).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('nexus-token')") == "s3cret"
    page.reload()
    expect(page.locator('#sessions button[data-session="main"]')).to_be_visible()
    expect(page.locator("#token-dialog")).to_be_hidden()


def test_a_token_in_the_address_is_taken_and_removed_from_it(live: Live, page: Any) -> None:
    """``nexus serve`` prints ``http://…/#token=…`` when it made the token itself (``require_token``)."""
    server = live(ServerConfig(tokens=["s3cret"]))
    page.goto(server.url + "/#token=s3cret")
    expect(page.locator('#sessions button[data-session="main"]')).to_be_visible()
    expect(page.locator("#token-dialog")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('nexus-token')") == "s3cret"
    assert "token" not in page.url  # not left in the address bar, the history or a bookmark


def test_phone_width_shows_one_pane_at_a_time(live: Live, page: Any) -> None:
    server = live()
    server.store.save_agent("coder", role="worker", session_label="main", spec={})
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server.url + "/")
    expect(page.locator('#sessions button[data-session="main"]')).to_be_visible()
    expect(page.locator("#pane-chat")).to_be_hidden()
    screenshot(page, "ui-phone-sessions.png")
    page.click('#sessions button[data-session="main"]')
    expect(page.locator("#pane-chat")).to_be_visible()
    expect(page.locator("#pane-tree")).to_be_hidden()
    expect(page.locator("#send")).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "nothing overflows the phone's width"
    screenshot(page, "ui-phone-chat.png")
    page.click('.views button[data-show="tree"]')
    expect(page.locator("#pane-tree")).to_be_visible()


def test_the_page_and_its_libraries_are_served_without_a_token_and_with_a_strict_csp(live: Live) -> None:
    import httpx

    server = live(ServerConfig(tokens=["s3cret"]))
    with httpx.Client(base_url=server.url, timeout=10) as client:
        index = client.get("/")
        assert index.status_code == 200 and "script-src 'self'" in index.headers["content-security-policy"]
        assert client.get("/ui/../v1/sessions").status_code in (401, 404)
        assert client.get("/v1/sessions").status_code == 401
        for path in ("/ui/index.html", "/ui/js/app.js", "/ui/app.css", "/ui/vendor/markdown-it.min.js",
                     "/ui/vendor/purify.min.js"):  # fmt: skip
            also = client.get(path)
            assert also.status_code == 200, path
            assert also.headers["content-security-policy"] == index.headers["content-security-policy"], path
            assert "frame-ancestors 'none'" in also.headers["content-security-policy"]
            assert also.headers["x-content-type-options"] == "nosniff"
        assert "javascript" in client.get("/ui/js/app.js").headers["content-type"], "a module needs a script type"
        head = client.head("/")
        assert head.status_code == 200 and head.content == b"" and "content-security-policy" in head.headers


def test_the_events_of_a_session_the_server_does_not_know_are_asked_for_once(live: Live, page: Any) -> None:
    """A 404 from ``…/events`` was retried forever, backing off to every 15 s (a trial, on sub-agent sessions
    the routes did not take then); asking again will not make the session exist."""
    server = live()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if request.url.endswith("/events") else None)
    page.goto(f"{server.url}/#s=nosuch")
    expect(page.locator("#live")).to_have_text("offline")
    page.wait_for_timeout(3_500)  # the old loop asked again after 1 s and after 3 s
    assert len(asked) == 1, asked
