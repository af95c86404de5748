"""The walk of one inbound chat message: how often it re-enters a package it left, and who handles a token.

Run:  PYTHONPATH=src .venv/bin/python bench/walk_message.py [--list]

One real inbound message goes the whole way: a real subprocess adapter (``bench/adapters/walk_chat.py``)
prints it on its ``monitor`` stdout; the broker of ``nexus adapters monitor`` (``build_host`` with its
monitors) accepts it, runs it through the engine on a scripted model, and streams the reply to the same
adapter's ``stream`` process, which writes it down. A warm-up message goes first (imports, processes),
then ``sys.setprofile`` records the second message's path, in the tasks it causes (a context variable
marks them) and on the ledger's writer thread.

Two numbers:

- **re-entries**: steps where the message comes back into a package it had left, i.e. a package it
  visited before, with no frame of it on the current stack, entered from the event loop (a task or
  callback taking the message on) or from a lower layer of DESIGN §2's ladder (a callback up the
  ladder). A call down the ladder returns to its caller and is no re-entry. Each caller → callee pair
  of functions counts once (a loop over tokens is one step). The types, clocks and settings every
  layer uses (``nexus.llm``, ``nexus.config``), the dataclass and lazy-import helpers
  (``nexus._dataclass`` compiles a class's ``__init__`` the first time it is built), the per-loop getter
  (``nexus._per_loop``) and the wait for a write handed over (``nexus._settled``: an ``await`` that
  returns to its caller; unranked, they read as the top of the ladder, so a second call counted) and the
  telemetry every layer reports to (``nexus.telemetry``, layer 0: a span or a metric is a call down
  that returns, never the message handed on) are not steps.
- **token wrappers**: the functions that hand the reply's first token on between the engine's event
  channel (``EventChannel.publish``) and the adapter's pipe (``StreamDelivery.write``), endpoints and
  generated dataclass constructors left out; a class's methods count as one wrapper (a
  ``Subscription`` is one, however many of its methods touch the token).

``tests/test_walk_message.py`` keeps the re-entries at 8 or fewer and the wrappers at 4 or fewer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADAPTER = Path(__file__).resolve().parent / "adapters" / "walk_chat.py"
TOKEN = "Zq9-walk-token!!"
"""The reply's first chunk exactly (the scripted model streams 16 characters at a time)."""
RANK = {"cli": 8, "server": 8, "broker": 7, "streaming": 6, "routing": 6, "adapters": 5.5, "engine": 5,
        "ledger": 4, "tools": 3, "mcp": 3, "agent": 2}  # fmt: skip
"""DESIGN section 2's ladder (``adapters`` sits below ``streaming``, which uses it)."""
VOCABULARY = (
    "nexus.llm", "nexus.config", "nexus.testing", "nexus.errors", "nexus._lazy", "nexus._dataclass", "nexus.telemetry",
    "nexus._per_loop", "nexus._settled",
)  # fmt: skip
ON_PATH = contextvars.ContextVar("walk_on_path", default=False)
DOWNWARD = "--downward" in sys.argv
_GENERATORS = 0x20 | 0x80 | 0x200  # generator, coroutine, async generator: each resume is a call too
EVENT = {"event_id": "e1", "timestamp": 1_700_000_000_000, "content": "hello", "content_type": "text",
         "platform": "walk", "account_id": "main", "sender_id": "ada", "container_id": "dm-ada",
         "container_kind": "dm", "delivery_metadata": {"message_id": "in-1"}}  # fmt: skip


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _ours(frame: Any) -> bool:
    module = frame.f_globals.get("__name__", "")
    return module.startswith("nexus.") and not module.startswith(VOCABULARY)


def _name(frame: Any) -> str:
    return f"{frame.f_globals.get('__name__')}.{frame.f_code.co_qualname}"


@dataclass
class Walk:
    """What ``sys.setprofile`` saw of one message (see the module docstring)."""

    visited: set[str] = field(default_factory=set)
    seen: set[Any] = field(default_factory=set)
    edges: set[tuple[str | None, str]] = field(default_factory=set)
    reentries: list[tuple[str, str, str]] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    upstream: set[str] = field(default_factory=set)
    token: str = TOKEN
    in_flight: bool = False
    downward: bool = False
    """Count calls down the ladder into a package the message had left too (``--downward``)."""

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return") or not _ours(frame):
            return
        if threading.current_thread() is threading.main_thread() and not ON_PATH.get():
            return
        name = _name(frame)
        generator = frame.f_code.co_flags & _GENERATORS
        if event == "return":
            values = list(frame.f_locals.values()) if generator else [arg]
            if any(_holds(v, self.token, 2) for v in values):
                self._handled(name)
            return
        if not generator or frame not in self.seen:
            if generator:
                self.seen.add(frame)  # kept alive: the ids of frames are not reused meanwhile
            self._enter(frame, name)
        self._token(frame, name)

    def _enter(self, frame: Any, name: str) -> None:
        pkg = package(frame.f_globals["__name__"])
        on_stack, caller, back = set(), None, frame.f_back
        while back is not None:
            if _ours(back):
                on_stack.add(package(back.f_globals["__name__"]))
                caller = caller or _name(back)
            back = back.f_back
        upward = self.downward or caller is None or RANK.get(package(caller), 9) <= RANK.get(pkg, 9)
        if upward and pkg in self.visited and pkg not in on_stack and (caller, name) not in self.edges:
            self.edges.add((caller, name))
            self.reentries.append((caller or "the event loop", pkg, name))
        self.visited |= on_stack | {pkg}

    def _token(self, frame: Any, name: str) -> None:
        code = frame.f_code
        params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if not any(_holds(frame.f_locals.get(p), self.token, 2) for p in params):
            return
        if name.endswith("EventChannel.publish") and not self.wrappers:
            self.in_flight = True
            back = frame.f_back
            while back is not None:  # whoever called the channel is the producing side
                self.upstream.add(_name(back))
                back = back.f_back
        self._handled(name)
        if name.endswith("StreamDelivery.write") and self.in_flight:
            self.in_flight = False
            self.token = "\0one token, once\0"

    def _handled(self, name: str) -> None:
        if "__create_fn__" in name:
            return
        if not self.in_flight:
            self.upstream.add(name)  # it had the token before the channel did: the producing side
        elif name not in self.wrappers and name not in self.upstream:
            self.wrappers.append(name)

    def between(self) -> list[str]:
        """The wrappers strictly between the channel and the pipe, a class's methods as one."""
        owners: list[str] = []
        for name in self.wrappers:
            if name.endswith(("EventChannel.publish", "StreamDelivery.write")):
                continue
            owner = name.rsplit(".", 1)[0] if name.rsplit(".", 2)[-2][:1].isupper() else name
            if owner not in owners:
                owners.append(owner)
        return owners


def _holds(value: Any, token: str, depth: int) -> bool:
    if isinstance(value, str):
        return token in value
    if isinstance(value, (bytes, bytearray)):
        return token.encode() in value
    if depth <= 0 or value is None or isinstance(value, (int, float, bool)):
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds(v, token, depth - 1) for v in value[:8])
    slots = getattr(type(value), "__slots__", None)
    names = list(slots) if isinstance(slots, (tuple, list)) else list(getattr(value, "__dict__", None) or {})
    return any(_holds(getattr(value, n, None), token, depth - 1) for n in names[:12] if isinstance(n, str))


def _write_config(home: Path, inbox: Path, outbox: Path) -> None:
    (home / "nexus.toml").write_text(
        '[broker]\nmode = "followup"\n\n[providers.scripted]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "none"\n\n'
        '[agents.helper]\nmodel = "scripted/walk"\n\n'
        f'[adapters.walk]\ncommand = "{sys.executable} {ADAPTER}"\n\n'
        f'[adapters.walk.accounts.main]\nmonitor = true\nagent = "helper"\n'
        f'config = {{ inbox = "{inbox}", outbox = "{outbox}" }}\n',
        encoding="utf-8",
    )


async def _message(inbox: Path, outbox: Path, event: dict[str, Any], replies: int) -> None:
    """Plant one monitor line and wait until the adapter has written the reply (and its row is in)."""
    with inbox.open("a", encoding="utf-8") as file:
        file.write(json.dumps(event) + "\n")
    deadline = time.monotonic() + 60
    while _lines(outbox) < replies:
        if time.monotonic() > deadline:
            raise SystemExit("walk: no reply came back from the adapter within 60 s")
        await asyncio.sleep(0.01)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


async def walk(home: Path) -> Walk:
    """One warm-up message, then one measured message, through ``nexus adapters monitor``'s host."""
    from nexus.broker.host import build_host, checked_agents
    from nexus.config import load_config
    from nexus.ledger import Ledger
    from nexus.testing import ScriptedModel
    from nexus.testing.steps import text

    inbox, outbox = home / "inbox.jsonl", home / "outbox.jsonl"
    inbox.touch()
    _write_config(home, inbox, outbox)
    config = load_config()
    scripted = ScriptedModel([text("warm up"), text(TOKEN + " and the rest of the reply")], record=False)
    recorded = Walk(downward=DOWNWARD)
    with Ledger.open(config.database_path) as ledger:
        host = build_host(config, ledger, stream_fn=scripted.stream, monitors=True)
        for agent in checked_agents(config):  # start_host's steps, with the monitors' tasks marked
            host.broker.register_agent(agent.identity, spec=agent.spec, queue=agent.queue)
        await host.broker.start()
        assert host.inbound is not None
        marked = ON_PATH.set(True)
        host.inbound.start()  # the monitors' tasks (and those they start) are the message's path
        ON_PATH.reset(marked)
        try:
            await _message(inbox, outbox, dict(EVENT, event_id="e0"), 1)
            assert host.deliverer is not None
            await host.deliverer.wait()
            sys.setprofile(recorded.profile)
            threading.setprofile(recorded.profile)
            try:
                await _message(inbox, outbox, EVENT, 2)
                await host.deliverer.wait()
            finally:
                sys.setprofile(None)
                threading.setprofile(None)
        finally:
            await host.close()
    return recorded


def measure() -> Walk:
    """Walk one message in a fresh ``NEXUS_HOME``."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NEXUS_HOME"] = tmp
        return asyncio.run(walk(Path(tmp)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--list", action="store_true", help="name each re-entry and each wrapper")
    parser.add_argument(
        "--downward", action="store_true", help="count calls down the ladder into a package left before as well"
    )
    args = parser.parse_args()
    recorded = measure()
    per: dict[str, int] = {}
    for _, pkg, _ in recorded.reentries:
        per[pkg] = per.get(pkg, 0) + 1
    between = recorded.between()
    print(f"re-entries of a package the message had left: {len(recorded.reentries)} ({per})")
    print(f"wrappers a token passes between the engine's channel and the adapter's pipe: {len(between)}")
    if args.list:
        for caller, pkg, name in recorded.reentries:
            print(f"  re-enters {pkg:<10} {name}  (from {caller})")
        for owner in between:
            print(f"  wrapper  {owner}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
