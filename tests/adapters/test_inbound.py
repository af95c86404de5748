"""Inbound end to end, in real processes: Telegram updates → per-sender sessions → replies to each chat.

``nexus adapters monitor`` runs as a subprocess against a loopback fake of the Bot API and the
fake model server (it echoes the prompt): the builtin Telegram adapter's ``monitor`` and
``stream`` are its own subprocesses. Two chats get two sessions and each its own reply; an
update Telegram offers again after a restart runs no second time; a broker SIGKILLed in the
middle of a reply loses nothing and runs nothing twice after its restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexus.ledger import Ledger
from nexus.ledger._sql_db import run_inline
from nexus.ledger.broker_store import BrokerStore
from nexus.ledger.deliveries import DeliveryLog
from nexus.testing import FakeProviderServer, FakeTelegram
from nexus.testing.steps import echo

SRC = Path(__file__).resolve().parents[2] / "src"
TOKEN = "123456:TEST-TOKEN"
WAIT_S = 60.0


def _write_config(home: Path, tg: FakeTelegram, model: FakeProviderServer) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        'default_model = "fake/fake-model"\n\n[broker]\nmode = "followup"\n\n'
        f'[providers.fake]\napi = "openai-completions"\nbase_url = "{model.openai_base_url}"\napi_key = "test"\n\n'
        "[agents.assistant]\n\n"
        '[adapters.tg]\nbuiltin = "telegram"\n\n'
        '[adapters.tg.accounts.bot]\ncredential = "${TG_TOKEN}"\nmonitor = true\nagent = "assistant"\n'
        f'config = {{ api_base = "{tg.base_url}", poll_timeout_s = 1, edit_interval_ms = 60000 }}\n',
        encoding="utf-8",
    )


class Monitor:
    """``nexus adapters monitor`` (or ``nexus serve``) as a real process (stopped at the end of the test)."""

    def __init__(self, home: Path, log: Path, command: tuple[str, ...] = ("adapters", "monitor")) -> None:
        self.home = home
        self.log = log
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "NEXUS_HOME": str(self.home), "PYTHONPATH": str(SRC), "TG_TOKEN": TOKEN}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nexus.cli", *self.command],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # its adapter children are killed with it (the process group)
            )

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        process = self.process
        assert process is not None
        if sig == signal.SIGKILL:
            os.killpg(process.pid, signal.SIGKILL)  # the broker and its adapter processes die at once
        else:
            process.send_signal(sig)
        code = process.wait(timeout=30)
        self.process = None
        return code


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def monitor(isolated_env: Path, tmp_path: Path) -> Iterator[Monitor]:
    running = Monitor(isolated_env, tmp_path / "monitor.log")
    yield running
    if running.process is not None:
        os.killpg(running.process.pid, signal.SIGKILL)
        running.process.wait()


def _until(check: Callable[[], bool], monitor: Monitor, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        process = monitor.process
        if process is not None and process.poll() is not None:
            pytest.fail(f"nexus adapters monitor exited {process.returncode}: {monitor.log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen; log:\n{monitor.log.read_text()}")
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie nobody reaped counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _replied(tg: FakeTelegram, chat: int, text: str) -> bool:
    """A reply in ``chat`` whose final text carries ``text`` (the echo model repeats the prompt)."""
    return any(m.chat_id == str(chat) and text in m.text for m in list(tg.messages))


def _items(home: Path) -> list[tuple[str, str, str, str | None]]:
    with Ledger.open(home / "agents.db") as ledger:
        rows = BrokerStore(ledger.database).items(agent_id="assistant")
        return [(row.message_id or "", row.session_label, row.status, row.turn_id) for row in rows]


def _completed_turns(home: Path, label: str) -> list[str]:
    with Ledger.open(home / "agents.db") as ledger:
        texts = []
        for turn in run_inline(ledger.turns.path(label)):
            if turn.status == "completed":
                texts += [
                    str(m.message.content) for m in run_inline(ledger.turns.messages(turn.id)) if m.role == "user"
                ]
        return texts


def test_two_chats_two_sessions_and_a_replayed_update_runs_once(
    isolated_env: Path, tg: FakeTelegram, monitor: Monitor
) -> None:
    with FakeProviderServer(default=echo) as model:
        _write_config(isolated_env, tg, model)
        monitor.start()
        first = tg.push_message("hello from ada", chat_id=1001, sender_id=42)
        tg.push_message("hello from bob", chat_id=2002, sender_id=43)
        both = lambda: _replied(tg, 1001, "hello from ada") and _replied(tg, 2002, "hello from bob")  # noqa: E731
        _until(both, monitor, "a reply in each chat")
        assert monitor.stop() == 0

        ada = next(m for m in tg.messages if m.chat_id == "1001")
        assert ada.reply_to == 5000 + first  # the reply answers the inbound message
        assert not any("bob" in m.text for m in tg.messages if m.chat_id == "1001")
        items = _items(isolated_env)
        assert {(label, status) for _, label, status, _ in items} == {
            ("assistant~dm~telegram~42", "delivered"),
            ("assistant~dm~telegram~43", "delivered"),
        }
        assert items[0][0] == f"in:tg/bot:telegram:bot:{first}"

        _until(lambda: tg.polling == 0, monitor, "the stopped monitor's last poll ending")
        tg.replay(first)  # offered again to the next monitor, as after a bot restart
        tg.push_message("second from ada", chat_id=1001, sender_id=42)
        monitor.start()
        _until(lambda: _replied(tg, 1001, "second from ada"), monitor, "the reply to the second message")
        assert monitor.stop() == 0
        assert "1 inbound message(s) queued, 1 already seen" in monitor.log.read_text()

    assert len(_items(isolated_env)) == 3  # the replayed update was recognised, not queued again
    with Ledger.open(isolated_env / "agents.db") as ledger:  # each reply is recorded with its turn
        records = DeliveryLog(ledger.database).recent(session_label="assistant~dm~telegram~42")
    assert sorted((r.status, r.adapter, r.target["to"], r.path) for r in records) == [
        ("delivered", "tg", "1001", "native"), ("delivered", "tg", "1001", "native"),
    ]  # fmt: skip
    assert all(r.turn_id for r in records)
    ada_turns = _completed_turns(isolated_env, "assistant~dm~telegram~42")
    assert sum("hello from ada" in text for text in ada_turns) == 1
    assert sum("second from ada" in text for text in ada_turns) == 1
    assert len([m for m in tg.messages if m.chat_id == "1001"]) == 2


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the adapter processes through /proc")
def test_a_broker_killed_mid_reply_loses_nothing_and_runs_nothing_twice(
    isolated_env: Path, tg: FakeTelegram, monitor: Monitor
) -> None:
    chats = {1001 + n: f"question {n} from chat {1001 + n}" for n in range(4)}
    # the replies stream slowly, so the kill lands while runs are active
    with FakeProviderServer(default=echo, chunk_chars=2, chunk_delay=0.05) as model:
        _write_config(isolated_env, tg, model)
        monitor.start()
        for chat, text in chats.items():
            tg.push_message(text, chat_id=chat, sender_id=chat)
        _until(lambda: bool(tg.messages), monitor, "a reply starting")
        assert monitor.process is not None
        adapters = _children(monitor.process.pid)  # the Telegram monitor and stream processes
        assert len(adapters) >= 2
        monitor.stop(signal.SIGKILL)
        # the broker died without a word: its adapters see their stdin close and stop (no orphan keeps polling)
        _until(lambda: not any(_alive(pid) for pid in adapters), monitor, "the orphaned adapters exiting")
        monitor.start()
        _until(lambda: all(_replied(tg, chat, text) for chat, text in chats.items()), monitor, "every reply")
        assert monitor.stop() == 0

    items = _items(isolated_env)
    assert len(items) == len(chats) and {status for _, _, status, _ in items} == {"delivered"}
    for chat, text in chats.items():
        texts = _completed_turns(isolated_env, f"assistant~dm~telegram~{chat}")
        assert sum(text in t for t in texts) == 1, (chat, texts)
    with Ledger.open(isolated_env / "agents.db") as ledger:  # the kill did cut a reply: its turn is kept, aborted
        statuses = [t.status for chat in chats for t in run_inline(ledger.turns.path(f"assistant~dm~telegram~{chat}"))]
    assert "aborted" in statuses, statuses


def test_nexus_serve_routes_inbound_messages_too(isolated_env: Path, tg: FakeTelegram, tmp_path: Path) -> None:
    pytest.importorskip("uvicorn", reason="nexus serve needs the server extra")
    serve = Monitor(isolated_env, tmp_path / "serve.log", ("serve", "--port", "0"))
    with FakeProviderServer(default=echo) as model:
        _write_config(isolated_env, tg, model)
        serve.start()
        try:
            tg.push_message("hi over http", chat_id=3003, sender_id=7)
            _until(lambda: _replied(tg, 3003, "hi over http"), serve, "the reply")
        finally:
            assert serve.stop() == 0
    assert [label for _, label, _, _ in _items(isolated_env)] == ["assistant~dm~telegram~7"]
