"""The SSE event hub and ``GET /v1/sessions/{label}/events`` over real HTTP (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from nexus.config._server_schema import ServerConfig
from nexus.server._event_hub import HEARTBEAT, EventHub, HubError, HubFull

from .live import LiveServer, wait_until

Live = Callable[..., LiveServer]


@dataclass(slots=True)
class Frame:
    """One parsed SSE frame (comments are frames with ``comment`` set)."""

    event: str = "message"
    id: int | None = None
    data: dict[str, object] = field(default_factory=dict)
    comment: str | None = None


def frames(lines: Iterator[str]) -> Iterator[Frame]:
    """Parse SSE lines into frames (what an EventSource does, minus reconnecting)."""
    current: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in current or "event" in current:
                raw_id = current.get("id")
                yield Frame(current.get("event", "message"), None if raw_id is None else int(raw_id),
                            json.loads(current.get("data", "{}")))  # fmt: skip
            current = {}
        elif line.startswith(":"):
            yield Frame(event="", comment=line[1:].strip())
        else:
            name, _, value = line.partition(":")
            current[name] = value[1:] if value.startswith(" ") else value


def read_events(source: httpx.Response | Iterator[Frame], count: int) -> list[Frame]:
    """The next ``count`` events (heartbeats skipped).

    Pass the iterator of :func:`frames` to read a stream in several steps: dropping an
    ``iter_lines`` iterator part way closes httpx's connection.
    """
    stream = frames(source.iter_lines()) if isinstance(source, httpx.Response) else source
    got: list[Frame] = []
    while len(got) < count:
        frame = next(stream)
        if frame.comment is None:
            got.append(frame)
    return got


def subscribers(hub: EventHub, at_least: int = 1) -> Callable[[], bool]:
    return lambda: hub.subscriber_count >= at_least


# -- the hub alone ---------------------------------------------------------------------------------


def test_the_hub_loads_without_fastapi() -> None:
    """The broker imports the hub to publish; that must not pull in the web stack."""
    code = "import sys, nexus.server._event_hub; print(sorted(m for m in ('fastapi', 'starlette') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_publish_assigns_growing_ids_and_encodes_the_stream_event() -> None:
    hub = EventHub()
    first = hub.publish("main", "stream_start", {"runId": "r1", "sessionLabel": "main", "target": {}})
    second = hub.publish("other", "token", {"text": 'hi\n"there"'})
    third = hub.publish("main", "token", {"text": "x"})
    assert first < second < third
    (start, token) = hub.retained("main")
    assert token.frame == f'id: {third}\nevent: token\ndata: {{"type":"token","text":"x"}}\n\n'.encode()
    assert start.type == "stream_start" and [e.id for e in hub.retained("other")] == [second]


@pytest.mark.parametrize(
    ("event_type", "data"),
    [("to\nken", {}), ("", {}), ("token", {"type": "reasoning"}), ("x" * 65, {})],
)
def test_publish_refuses_bad_event_names(event_type: str, data: dict[str, object]) -> None:
    with pytest.raises(HubError):
        EventHub().publish("main", event_type, data)


def test_retention_by_count_bytes_and_age() -> None:
    now = [1000.0]
    hub = EventHub(retention_events=3, retention_seconds=60, retention_bytes=10_000, clock=lambda: now[0])
    ids = [hub.publish("s", "token", {"text": str(n)}) for n in range(5)]
    assert [e.id for e in hub.retained("s")] == ids[2:]
    now[0] += 61
    newest = hub.publish("s", "token", {"text": "late"})
    assert [e.id for e in hub.retained("s")] == [newest]
    hub.publish("s", "token", {"text": "y" * 20_000})
    assert [e.id for e in hub.retained("s")] == []  # one event larger than the byte budget is not kept


async def test_all_sessions_together_hold_at_most_the_total_byte_budget_oldest_first() -> None:
    """Each session was bounded (4 MiB), the process was not: 2,000 busy sessions held gigabytes."""
    hub = EventHub(retention_bytes=1_000_000, retention_total_bytes=200_000)
    watcher = hub.subscribe("session-0", None)
    first = hub.publish("session-0", "token", {"text": "x" * 900})
    for n in range(2_000):
        hub.publish(f"session-{n}", "token", {"text": "x" * 900})
    kept = {label: hub.retained(label) for label in (f"session-{n}" for n in range(2_000))}
    total = sum(len(event.frame) for events in kept.values() for event in events)
    assert 190_000 < total <= 200_000 and hub.retained_bytes == total  # full up to the budget, never past it
    survivors = sorted(event.id for events in kept.values() for event in events)
    assert survivors[0] > first and not kept["session-0"]  # the oldest went first, across sessions
    assert survivors == list(range(survivors[0], survivors[-1] + 1))  # exactly the newest ones are kept
    reset = (await watcher.next()).decode()  # type: ignore[union-attr]
    assert "event: reset" in reset and '"reason":"expired"' in reset  # told, never silently skipped
    watcher.close()
    for _ in range(20_000):  # events a session's own limit drops leave no bookkeeping behind
        hub.publish("chatty", "token", {"text": "y"})
    assert len(hub._order) <= 2 * (len(hub.retained("chatty")) + len(survivors)) + 1024


async def test_resume_replays_exactly_the_events_after_the_id() -> None:
    hub = EventHub()
    ids = [hub.publish("s", "token", {"text": str(n)}) for n in range(5)]
    sub = hub.subscribe("s", ids[1])
    chunk = await sub.next()
    assert chunk == b"".join(e.frame for e in hub.retained("s")[2:])
    assert sub.cursor == ids[-1]
    sub.close()
    sub.close()
    assert hub.subscriber_count == 0


async def test_a_reader_that_fell_behind_gets_one_reset_then_continues_live() -> None:
    hub = EventHub(retention_events=2)
    sub = hub.subscribe("s")
    for n in range(5):
        hub.publish("s", "token", {"text": str(n)})
    reset = (await sub.next()).decode()  # type: ignore[union-attr]
    assert "event: reset" in reset and '"reason":"expired"' in reset
    assert sub.cursor == hub.retained("s")[-1].id
    live = hub.publish("s", "token", {"text": "live"})
    assert (await sub.next()) == hub.retained("s")[-1].frame and sub.cursor == live
    sub.close()


async def test_an_id_from_an_earlier_process_or_the_future_is_a_reset_that_says_unknown() -> None:
    """An id this process never issued said ``expired`` when it was older than the process; docs say ``unknown``."""
    hub = EventHub(retention_events=2)
    earlier_process = hub.publish("s", "token", {"text": "a"}) - 10  # ids start at the start time in µs
    for _ in range(3):
        newest = hub.publish("s", "token", {"text": "b"})
    for stale in (5, earlier_process, newest + 1000):
        sub = hub.subscribe("s", stale)
        chunk = (await sub.next()) or b""
        assert b"event: reset" in chunk and b'"reason":"unknown"' in chunk and sub.cursor == newest, stale
        sub.close()


async def test_heartbeat_after_quiet_and_close_ends_every_reader() -> None:
    hub = EventHub(heartbeat_seconds=0.01)
    sub = hub.subscribe("s")
    assert await sub.next() == HEARTBEAT
    waiting = asyncio.ensure_future(sub.next())
    await asyncio.sleep(0)
    hub.close()
    assert await waiting is None and hub.subscriber_count == 0
    with pytest.raises(HubError):
        hub.subscribe("s")


async def test_publish_from_another_thread_wakes_the_reader() -> None:
    hub = EventHub(heartbeat_seconds=30)
    sub = hub.subscribe("s")
    waiting = asyncio.ensure_future(sub.next())
    await asyncio.sleep(0)
    thread = threading.Thread(target=hub.publish, args=("s", "token", {"text": "from a thread"}))
    thread.start()
    chunk = await asyncio.wait_for(waiting, 10)
    thread.join()
    assert chunk is not None and b"from a thread" in chunk
    sub.close()


def test_subscriber_slots_are_bounded() -> None:
    hub = EventHub(max_subscribers=1)
    sub = hub.subscribe("s")
    with pytest.raises(HubFull):
        hub.subscribe("t")
    sub.close()
    hub.subscribe("t").close()


# -- over HTTP -------------------------------------------------------------------------------------


def test_stream_delivers_stream_events_with_ids(live: Live) -> None:
    server = live()
    with httpx.Client(base_url=server.url, timeout=10) as client, client.stream("GET", "/v1/sessions/main/events") as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        wait_until(subscribers(server.hub), "the subscription")
        sent: list[tuple[str, dict[str, Any]]] = [
            ("stream_start", {"runId": "r1", "sessionLabel": "main", "target": {"channel": "api"}}),
            ("token", {"text": "Hel"}),
            ("tool_status", {"toolName": "read", "toolCallId": "c1", "status": "started", "summary": "Read a.md"}),
            ("stream_end", {"runId": "r1", "final": True}),
        ]
        ids = [server.hub.publish("main", kind, data) for kind, data in sent]
        got = read_events(r, 4)
    assert [(f.event, f.id) for f in got] == [(kind, i) for (kind, _), i in zip(sent, ids, strict=True)]
    assert got[2].data == {"type": "tool_status", **sent[2][1]}
    wait_until(lambda: server.hub.subscriber_count == 0, "the subscription to end after the client left")


def test_last_event_id_resumes_without_loss_or_duplicates(live: Live) -> None:
    server = live()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        with client.stream("GET", "/v1/sessions/main/events") as r:
            wait_until(subscribers(server.hub), "the subscription")
            ids = [server.hub.publish("main", "token", {"text": f"t{n}"}) for n in range(3)]
            got = read_events(r, 2)  # the client "drops" after two events
        assert [f.id for f in got] == ids[:2]
        wait_until(lambda: server.hub.subscriber_count == 0, "the first stream to end")
        ids += [server.hub.publish("main", "token", {"text": f"t{n}"}) for n in range(3, 5)]
        headers = {"Last-Event-ID": str(got[-1].id)}
        with client.stream("GET", "/v1/sessions/main/events", headers=headers) as r:
            stream = frames(r.iter_lines())
            again = read_events(stream, 3)
            wait_until(subscribers(server.hub), "the resumed subscription")
            ids.append(server.hub.publish("main", "token", {"text": "t5"}))
            again += read_events(stream, 1)
    assert [f.id for f in again] == ids[2:]
    assert [f.data["text"] for f in again] == ["t2", "t3", "t4", "t5"]


def test_an_expired_id_gets_a_reset_event_then_live(live: Live) -> None:
    server = live(ServerConfig(events_retention_count=2))
    stale = server.hub.publish("main", "token", {"text": "old"})
    for n in range(3):
        server.hub.publish("main", "token", {"text": str(n)})
    headers = {"Last-Event-ID": str(stale)}
    with (
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("GET", "/v1/sessions/main/events", headers=headers) as r,
    ):
        stream = frames(r.iter_lines())
        (reset,) = read_events(stream, 1)
        live_id = server.hub.publish("main", "token", {"text": "new"})
        (after,) = read_events(stream, 1)
    assert reset.event == "reset" and reset.data["reason"] == "expired" and reset.data["last_event_id"] == stale
    assert reset.id == reset.data["resume_id"] and after.id == live_id and after.data["text"] == "new"


def test_heartbeat_comments_keep_an_idle_stream_open(live: Live) -> None:
    server = live(ServerConfig(events_heartbeat_seconds=0.05))
    with httpx.Client(base_url=server.url, timeout=10) as client, client.stream("GET", "/v1/sessions/main/events") as r:
        lines = r.iter_lines()
        assert next(lines) == "retry: 2000"
        comments = [line for line in (next(lines) for _ in range(6)) if line.startswith(":")]
    assert len(comments) >= 2 and set(comments) == {": keepalive"}


def test_a_client_that_leaves_mid_stream_frees_its_slot_and_others_go_on(live: Live) -> None:
    server = live()
    with httpx.Client(base_url=server.url, timeout=10) as client, client.stream("GET", "/v1/sessions/main/events") as r:
        stream = frames(r.iter_lines())
        wait_until(subscribers(server.hub), "the staying subscription")
        sock = socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
        sock.sendall(b"GET /v1/sessions/main/events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        wait_until(subscribers(server.hub, 2), "the leaving subscription")
        sock.close()  # gone mid-stream, while waiting for the next event, without a word
        wait_until(lambda: server.hub.subscriber_count == 1, "the server to notice the disconnect")
        server.hub.publish("main", "token", {"text": "two"})
        assert read_events(stream, 1)[0].data["text"] == "two"  # the other reader was not disturbed
        assert client.get("/v1/sessions").status_code == 200


def test_a_stalled_reader_never_blocks_publishing_or_other_readers(live: Live) -> None:
    """A client that stops reading gets the events that fit its socket, one reset, then live ones."""
    server = live(ServerConfig(events_retention_count=20))
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    stalled.connect(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    stalled.sendall(b"GET /v1/sessions/main/events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    got_fast: list[Frame] = []
    total, blob = 300, "z" * 32_768  # 9.8 MB: more than the stalled socket's buffers can hold
    with httpx.Client(base_url=server.url, timeout=30) as client, client.stream("GET", "/v1/sessions/main/events") as r:
        wait_until(subscribers(server.hub, 2), "both subscriptions")
        stream = frames(r.iter_lines())

        def read_all() -> None:
            for _ in range(total):
                got_fast.extend(read_events(stream, 1))

        reader = threading.Thread(target=read_all)
        reader.start()
        ids = []
        for n in range(total):  # the reading client stays within 5 events, well inside retention
            wait_until(lambda n=n: len(got_fast) >= n - 5, "the reading client")  # type: ignore[misc]
            ids.append(server.hub.publish("main", "token", {"text": blob, "n": n}))
        reader.join(60)
    assert [f.id for f in got_fast] == ids  # the reading client got every event, in order
    final = server.hub.publish("main", "stream_end", {"runId": "r", "final": True})
    stalled.settimeout(30)
    received = b""
    while f"id: {final}\n".encode() not in received:
        chunk = stalled.recv(1 << 20)
        assert chunk, "the stalled client's stream ended early"
        received += chunk
    stalled.close()
    body = received.split(b"\r\n\r\n", 1)[1].decode()
    seen = [Frame(f.event, f.id) for f in frames(iter(_dechunk(body).split("\n"))) if f.comment is None]
    resets = [f for f in seen if f.event == "reset"]
    assert len(resets) == 1, "the stalled client fell out of retention exactly once"
    before = [f.id for f in seen[: seen.index(resets[0])]]
    assert before == ids[: len(before)] and len(before) < total  # a gap-free prefix, then the reset
    assert seen[-1].id == final


def _dechunk(body: str) -> str:
    """The payload of an HTTP/1.1 chunked body (hex size line, data, CRLF), as text."""
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition("\r\n")
        if not size_line:
            continue
        size = int(size_line, 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2 :]
    return "".join(out)


def test_unknown_session_bad_id_and_auth(live: Live) -> None:
    server = live(ServerConfig(tokens=["s3cret"]))
    auth = {"authorization": "Bearer s3cret"}
    with httpx.Client(base_url=server.url, timeout=10) as client:
        missing = client.get("/v1/sessions/main/events")
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "unauthorized"
        unknown = client.get("/v1/sessions/nope/events", headers=auth)
        assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"
        bad = client.get("/v1/sessions/main/events", headers={**auth, "Last-Event-ID": "abc"})
        assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]["message"]
        with client.stream("GET", "/v1/sessions/main/events", headers=auth) as r:
            assert r.status_code == 200
    assert server.hub.subscriber_count in (0, 1)  # the last stream may still be closing


def test_shutdown_ends_open_streams(live: Live) -> None:
    server = live()
    with httpx.Client(base_url=server.url, timeout=10) as client, client.stream("GET", "/v1/sessions/main/events") as r:
        wait_until(subscribers(server.hub), "the subscription")
        server.hub.close()
        rest = list(r.iter_lines())  # returns: the server ended the response
    assert all(not line or line.startswith("retry") for line in rest)
