"""Two and three ``nexus serve`` processes on one PostgreSQL ledger: a run's events reach an SSE client of any
process with the same ids, ``Last-Event-ID`` resumes on another process without gaps or repeats, and a
``nexus send --wait`` sent to one process returns the reply of the run another process made.

Real processes, real PostgreSQL (a fresh database per test), the loopback fake provider streaming slowly.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo, stall, text

from .serve_proc import nexus, serve_env, serving, write_config

pytestmark = pytest.mark.slow  # real processes and a real PostgreSQL

LONG = "streamed across processes " * 8  # echoed back in 16-character chunks, one every 50 ms


def _announcement(home: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    from nexus.config import load_config
    from nexus.server.discovery import server_file

    with monkeypatch.context() as patch:
        patch.setenv("NEXUS_HOME", str(home))
        patch.setenv("NEXUS_DATABASE_URL", url)
        return server_file(load_config())


@contextmanager
def _servers(
    homes: list[Path], url: str, provider: FakeProviderServer, monkeypatch: pytest.MonkeyPatch, config: str = ""
) -> Iterator[list[tuple[subprocess.Popen[str], str]]]:
    with ExitStack() as stack:
        started = []
        for home in homes:
            write_config(home, provider, config)
            env = {"NEXUS_DATABASE_URL": url}
            started.append(stack.enter_context(serving(home, env=env, announced=_announcement(home, url, monkeypatch))))
        yield started


class SseReader:
    """Reads one SSE stream on a thread until ``stream_end``/``stream_error``; ``events`` = (id, type, data).

    ``from_next_start``: keep events from the next run's ``stream_start`` on. The end of a run that finished
    just before may still be on its way to a process's hub (the log is written every 20 ms and tailed), and
    a reader that opened meanwhile would stop at that run's ``stream_end``.
    """

    def __init__(
        self,
        url: str,
        last_event_id: int | None = None,
        ends: tuple[str, ...] = ("stream_end", "stream_error"),
        from_next_start: bool = False,
    ) -> None:
        self.ends = ends
        self.from_next_start = from_next_start
        self.events: list[tuple[int, str, dict[str, object]]] = []
        self.connected = threading.Event()
        self.done = threading.Event()
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self.connected.wait(30), "the event stream did not open"

    def _read(self, url: str, headers: dict[str, str]) -> None:
        with httpx.stream("GET", url, headers=headers, timeout=60) as response:
            assert response.status_code == 200
            self.connected.set()
            frame: dict[str, str] = {}
            for line in response.iter_lines():
                if line:
                    key, _, value = line.partition(": ")
                    frame[key] = value
                    continue
                if "id" in frame and (self.events or not self.from_next_start or frame["event"] == "stream_start"):
                    self.events.append((int(frame["id"]), frame["event"], json.loads(frame["data"])))
                    if frame["event"] in self.ends:
                        break
                frame = {}
        self.done.set()

    def wait(self) -> list[tuple[int, str, dict[str, object]]]:
        assert self.done.wait(60), f"no stream_end; got {[e[1] for e in self.events]}"
        return self.events


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_a_run_streams_to_every_process_and_resumes_on_a_third(
    postgres_url: str, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    homes = [tmp_path / "a", tmp_path / "b"]
    with FakeProviderServer(default=echo, chunk_delay=0.05) as provider:
        write_config(homes[0], provider)
        assert nexus(homes[0], "agents", "add", "coder", env={"NEXUS_DATABASE_URL": postgres_url}).returncode == 0
        with _servers(homes, postgres_url, provider, monkeypatch) as [(_, a), (_, b)]:
            warm = httpx.post(f"{a}/v1/agents/coder/messages", json={"content": "warm up"}, timeout=30)
            assert warm.status_code == 202, warm.text  # the session exists from now on
            _settled(postgres_url)
            stream = "/v1/sessions/agent:coder/events"
            on_a, on_b = SseReader(a + stream, from_next_start=True), SseReader(b + stream, from_next_start=True)
            sent = httpx.post(f"{a}/v1/agents/coder/messages", json={"content": LONG}, timeout=30)
            assert sent.status_code == 202, sent.text
            seen_a, seen_b = on_a.wait(), on_b.wait()
            # one run, whichever process ran it: the same events with the same ids on both processes
            assert seen_a == seen_b
            types = [kind for _, kind, _ in seen_b]
            assert types[0] == "stream_start" and types[-1] == "stream_end" and types.count("token") >= 5, types
            text = "".join(str(data.get("text", "")) for _, kind, data in seen_b if kind == "token")
            assert text.endswith(LONG)
            ids = [event_id for event_id, _, _ in seen_b]
            assert ids == sorted(set(ids))
            # a third process, started after the run: its hub holds nothing of it, the log does
            third = tmp_path / "c"
            write_config(third, provider)
            env = {"NEXUS_DATABASE_URL": postgres_url}
            with serving(third, env=env, announced=_announcement(third, postgres_url, monkeypatch)) as (_, c):
                resumed = SseReader(c + stream, last_event_id=ids[2]).wait()
                assert resumed == seen_b[3:]  # no gap, no repeat
                for garbage in ("abc", "-5", "1.5", str(2**64)):
                    refused = httpx.get(c + stream, headers={"Last-Event-ID": garbage}, timeout=10)
                    assert refused.status_code == 400 and "Last-Event-ID" in refused.json()["error"]["message"]


def _settled(url: str) -> None:
    deadline = time.monotonic() + 60
    while _rows(url, "SELECT count(*) FROM queue_items WHERE status IN ('queued', 'processing')") != [(0,)]:
        assert time.monotonic() < deadline, "the queue did not settle"
        time.sleep(0.1)


def test_send_wait_to_one_process_returns_the_reply_of_the_run_on_another(
    postgres_url: str, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    homes = [tmp_path / "a", tmp_path / "b"]
    env = {"NEXUS_DATABASE_URL": postgres_url}
    held = threading.Event()  # the first reply waits until the second message is queued, however slow the machine
    first_reply = stall(after_chunks=2, seconds=120, then=text(LONG), release=held)
    with FakeProviderServer(first_reply, default=echo, chunk_delay=0.1) as provider:
        write_config(homes[0], provider)
        assert nexus(homes[0], "agents", "add", "coder", env=env).returncode == 0
        with _servers(homes, postgres_url, provider, monkeypatch) as servers:
            first = httpx.post(f"{servers[1][1]}/v1/agents/coder/messages", json={"content": LONG}, timeout=30)
            assert first.status_code == 202, first.text
            deadline = time.monotonic() + 30
            running = "SELECT claimed_by FROM queue_items WHERE status = 'processing'"
            while not (claimed := _rows(postgres_url, running)):
                assert time.monotonic() < deadline, "the first message did not start"
                time.sleep(0.02)
            pids = [process.pid for process, _ in servers]
            runner = next(i for i, pid in enumerate(pids) if f":{pid} " in f"{claimed[0][0]} ")
            other = homes[1 - runner]  # `nexus send` there finds the process that is NOT running the session
            # it ran to its end alone: a loaded machine started `nexus send` after the first run had ended
            # and released the session, and the other process ran the second message
            sending = subprocess.Popen(
                [sys.executable, "-m", "nexus.cli", "send", "coder", "the second one", "--mode", "followup", "--wait",
                 "--json"], env=serve_env(other, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            queued = "SELECT count(*) FROM queue_items"
            while _rows(postgres_url, queued) != [(2,)]:
                assert sending.poll() is None, sending.communicate()
                assert time.monotonic() < deadline + 90, "the second message was not queued"
                time.sleep(0.02)
            held.set()
            stdout, stderr = sending.communicate(timeout=120)
            sent = subprocess.CompletedProcess(sending.args, sending.returncode, stdout, stderr)
            assert sent.returncode == 0, sent.stderr
            assert "sent to the running nexus serve" in sent.stderr
            answer = json.loads(sent.stdout)
            assert answer["status"] == "delivered" and answer["turn_status"] == "completed"
            assert str(answer["reply"]).endswith("the second one")
            item = answer["queue_item_id"]
            (ran_by,) = _rows(postgres_url, f"SELECT claimed_by FROM queue_items WHERE id = '{item}'")
            assert f":{pids[runner]} " in f"{ran_by[0]} "  # the run was the other process's


def _runner(url: str, pids: list[int]) -> int:
    """The index of the process whose claim holds the message being run."""
    deadline = time.monotonic() + 30
    running = "SELECT claimed_by FROM queue_items WHERE status = 'processing'"
    while not (claimed := _rows(url, running)):
        assert time.monotonic() < deadline, "the message did not start"
        time.sleep(0.02)
    return next(i for i, pid in enumerate(pids) if f":{pid} " in f"{claimed[0][0]} ")


@contextmanager
def _two_with_fast_leases(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[tuple[subprocess.Popen[str], str]]]:
    """Two servers whose dead or paused lease holder is taken over after 2 s (TTL), agent ``coder`` warmed up
    (one message run to its end), the provider streaming a chunk every 100 ms."""
    homes = [tmp_path / "a", tmp_path / "b"]
    with FakeProviderServer(default=echo, chunk_delay=0.1) as provider:
        write_config(homes[0], provider)
        assert nexus(homes[0], "agents", "add", "coder", env={"NEXUS_DATABASE_URL": url}).returncode == 0
        with _servers(homes, url, provider, monkeypatch, "\n[broker]\nlease_ttl_ms = 2000") as servers:
            warm = httpx.post(f"{servers[0][1]}/v1/agents/coder/messages", json={"content": "warm up"}, timeout=30)
            assert warm.status_code == 202, warm.text
            _settled(url)
            yield servers


def test_a_process_killed_mid_stream_is_told_to_the_readers_of_another_and_the_run_starts_again(
    postgres_url: str, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _two_with_fast_leases(postgres_url, tmp_path, monkeypatch) as servers:
        sent = httpx.post(f"{servers[0][1]}/v1/agents/coder/messages", json={"content": LONG * 3}, timeout=30)
        assert sent.status_code == 202, sent.text
        runner = _runner(postgres_url, [process.pid for process, _ in servers])
        reader = SseReader(servers[1 - runner][1] + "/v1/sessions/agent:coder/events", ends=("stream_end",))
        deadline = time.monotonic() + 30
        while sum(kind == "token" for _, kind, _ in reader.events) < 3:  # the reply is streaming
            assert time.monotonic() < deadline, reader.events
            time.sleep(0.02)
        servers[runner][0].send_signal(signal.SIGKILL)
        events = reader.wait()
    kinds = [kind for _, kind, _ in events]
    cut = kinds.index("stream_error")  # the dead run's stream ends with an error that says why
    assert "stopped mid-run" in str(events[cut][2]["error"]) and events[cut][2]["partial"] is True
    assert "stream_start" in kinds[cut:] and kinds[-1] == "stream_end"  # then the run again, to its end
    text = "".join(str(data.get("text", "")) for _, kind, data in events[cut:] if kind == "token")
    assert text.endswith(LONG * 3)


def test_a_paused_run_that_lost_its_lease_publishes_no_end_into_the_new_run_s_stream(
    postgres_url: str, isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _two_with_fast_leases(postgres_url, tmp_path, monkeypatch) as servers:
        (start,) = _rows(postgres_url, "SELECT coalesce(max(id), 0) FROM run_events")[0]
        sent = httpx.post(f"{servers[0][1]}/v1/agents/coder/messages", json={"content": LONG * 3}, timeout=30)
        assert sent.status_code == 202, sent.text
        runner = _runner(postgres_url, [process.pid for process, _ in servers])
        paused = servers[runner][0]
        deadline = time.monotonic() + 30
        while not _rows(postgres_url, f"SELECT 1 FROM run_events WHERE id > {start} AND event_type = 'token'"):
            assert time.monotonic() < deadline, "the reply did not start streaming"
            time.sleep(0.02)
        paused.send_signal(signal.SIGSTOP)  # past the lease: the other process takes the message over
        try:
            _settled(postgres_url)  # the other process ran it to its end
        finally:
            paused.send_signal(signal.SIGCONT)  # it wakes mid-run, still believing it holds the session
        time.sleep(4.0)  # let the woken run end (its renewal or its write finds the lease lost)
        assert paused.poll() is None
    rows = _rows(postgres_url, f"SELECT event_type, payload FROM run_events WHERE id > {start} ORDER BY id")
    events = [(kind, json.loads(str(payload))) for kind, payload in rows]
    kinds = [kind for kind, _ in events]
    cut = kinds.index("stream_error")  # the takeover ends the paused run for every reader
    assert "stopped mid-run" in str(events[cut][1]["error"])
    (new_run,) = [data["runId"] for kind, data in events[cut:] if kind == "stream_start"]
    ends = [(kind, data.get("runId")) for kind, data in events[cut + 1 :] if kind in ("stream_end", "stream_error")]
    assert ends == [("stream_end", new_run)], ends  # the paused run's own end is not published after it
