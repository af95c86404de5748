"""Adapters that cannot wedge, spy or flood (issue 20, items 3, 4, 7, 8).

Real adapter processes (``scripts/misbehave.py``, ``scripts/recorder.py``): one that stops
reading its stdin, one that exits at once, one that looks for the other adapters'
credentials, one that prints a 100 MB line and thousands of garbage lines, one that floods
its stderr. Each must end in a clear record, and the account must stay usable.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from adapter_helpers import MakeManager, adapter, events_of, script_command

from nexus.adapters.types import DeliveryTarget
from nexus.llm.redact import add_secrets
from nexus.streaming.events import StreamEnd, StreamEvent, Token
from nexus.streaming.router import StreamRouter
from nexus.testing import InstantClock


def _reply(chars: int) -> list[StreamEvent]:
    """A reply of ``chars`` characters in 4 KB tokens (the router adds ``stream_start``)."""
    piece = "y" * 4096
    return [*(Token(piece) for _ in range(chars // len(piece))), StreamEnd("r1")]


async def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_adapter_that_stops_reading_stdin_is_killed_and_its_account_serves_the_next_delivery(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    flag = tmp_path / "deaf-once"
    config = {"behaviour": "deaf_once", "flag": str(flag)}
    manager = make_manager(
        {"m": adapter(command=script_command("misbehave.py"), accounts={"a": {"config": config}})}, clock=InstantClock()
    )
    router = StreamRouter(manager, write_timeout_s=0.5, finish_timeout_s=10)
    target = DeliveryTarget("m", "a", "u")
    run_goes_on = asyncio.Event()

    async def long_run() -> AsyncIterator[StreamEvent]:
        for event in _reply(2 << 20):  # 2 MB: more than the pipe and our write buffer hold
            if isinstance(event, StreamEnd):
                await run_goes_on.wait()  # the run is still busy (tools, say) long after the adapter wedged
            yield event

    first = asyncio.create_task(router.deliver(target, long_run()))
    await _until(flag.exists)  # the first delivery holds the account, on the process that will not read
    # the next delivery to the account is served while the first run still goes on
    second = await asyncio.wait_for(router.deliver(target, events_of(_reply(8192))), 60)
    assert second.ok, second.error
    deaf_pid = int(flag.read_text())
    assert not _alive(deaf_pid), "the stuck process was killed"
    assert not first.done(), "the first delivery consumes its run to the end"
    run_goes_on.set()
    report = await asyncio.wait_for(first, 60)
    assert report.status == "failed" and not report.partial and report.message_ids == []
    assert "stopped reading its stdin" in (report.error or "") and "killed" in (report.error or "")
    assert (await manager.stream_process("m", "a")).supervisor.starts == 2


async def test_a_stream_process_that_dies_at_start_is_failed_not_partial(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    """Text written to a process that died before showing anything never reached the user."""
    config = {"record": str(tmp_path / "lines.jsonl"), "die_after": 1}
    manager = make_manager({"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": config}})})
    report = await StreamRouter(manager).deliver(DeliveryTarget("rec", "x", "u"), events_of(_reply(8192)))
    assert report.status == "failed" and not report.partial and report.message_ids == []
    assert "exited with code 3" in (report.error or "")


async def test_an_adapter_finds_no_other_adapters_credential_and_no_broker_secret_in_its_environment(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    token_a, token_b = "111111:token-of-account-a-000", "222222:token-of-account-b-000"
    configured_key = "configured-provider-key-0042"  # a key from nexus.toml, under an innocent variable name
    add_secrets([configured_key])
    dump = tmp_path / "spy.json"
    spy = {"search": str(tmp_path), "needle": token_b, "dump": str(dump)}
    env = {
        **os.environ,
        "TOKEN_A": token_a,
        "TOKEN_B": token_b,
        "NEXUS_HOME": str(tmp_path / "home"),
        "NEXUS_TOKEN": "server-token-0000000",
        "OPENAI_API_KEY": "sk-parent-openai-000000000000",
        "UPSTREAM_CRED": "sk-proj-AbCdEf0123456789AbCdEf0123",  # key-shaped, named like nothing secret
        "MY_LLM": configured_key,
    }
    adapters = {
        "m": adapter(
            command=script_command("misbehave.py"),
            accounts={
                "a": {"credential": "${TOKEN_A}", "config": spy},
                "b": {"credential": "${TOKEN_B}", "config": {"behaviour": "normal"}},
            },
        )
    }
    manager = make_manager(adapters, env=env, state_dir=None)  # the default: the system's temp directory
    router = StreamRouter(manager)
    held = await router.deliver(DeliveryTarget("m", "b", "u"), events_of(_reply(4096)))
    assert held.ok, held.error  # b's stream process stays up, holding its context
    result = await manager.send(DeliveryTarget("m", "a", "x"), "hello")
    assert result.success, result.error
    seen = json.loads(dump.read_text())
    assert seen["found"] == [], "another adapter's credential is readable from a file"
    assert seen["credential"] == {"kind": "token", "value": token_a}, "its own context, read twice"
    leaked = {name for name, value in seen["env"].items() for secret in env.values() if secret in value}
    assert not leaked & {"TOKEN_A", "TOKEN_B", "NEXUS_TOKEN", "OPENAI_API_KEY", "UPSTREAM_CRED", "MY_LLM"}
    assert "NEXUS_HOME" not in seen["env"] and token_b not in json.dumps(seen["env"])
    assert not [fd for fd in os.listdir("/proc/self/fd") if "nexus-adapter-context" in _link(fd)], (
        "our copies are closed: the contexts live in their processes only"
    )


async def test_an_account_never_started_still_has_its_credential_kept_from_the_first_process(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    """An account's credential became a known secret only when its own process started: the first adapter
    process inherited another account's ``${VAR}`` when the variable's name looked like nothing secret."""
    other = "value-of-account-b-9f3c2e71"
    dump = tmp_path / "spy.json"
    env = {**os.environ, "INNOCENT_NAME": other}
    adapters = {
        "m": adapter(
            command=script_command("misbehave.py"),
            accounts={
                "a": {"config": {"search": str(tmp_path), "needle": other, "dump": str(dump)}},
                "b": {"credential": "${INNOCENT_NAME}", "config": {"behaviour": "normal"}},
            },
        )
    }
    manager = make_manager(adapters, env=env, state_dir=None)
    result = await manager.send(DeliveryTarget("m", "a", "x"), "hello")  # b's process is never started
    assert result.success, result.error
    seen = json.loads(dump.read_text())
    assert "INNOCENT_NAME" not in seen["env"] and other not in json.dumps(seen["env"])


def _link(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


async def test_monitor_refusals_are_logged_sparingly_and_a_100_mb_line_is_skipped_whole(
    tmp_path: Path, make_manager: MakeManager, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"garbage": 5000, "huge_mb": 100}
    manager = make_manager({"m": adapter(command=script_command("misbehave.py"), accounts={"a": {"config": config}})})
    seen: list[str] = []
    with caplog.at_level(logging.WARNING, logger="nexus.adapters"):
        events = manager.monitor("m", "a")
        async for event in events:
            seen.append(event.event_id)
            if event.event_id == "after":
                break
        await events.aclose()  # type: ignore[attr-defined]
    assert seen == ["after"], "the tail of the 100 MB line was parsed as an event of its own"
    assert manager.refused == 5001
    refusals = [r for r in caplog.records if "monitor line refused" in r.getMessage()]
    assert 5 <= len(refusals) <= 12, f"{len(refusals)} warnings for 5001 refused lines"


async def test_an_adapters_stderr_reaches_ours_within_a_budget(
    tmp_path: Path, make_manager: MakeManager, capfd: pytest.CaptureFixture[str]
) -> None:
    config = {"behaviour": "stderr_flood", "stderr_mb": 20}
    manager = make_manager(
        {"m": adapter(command=script_command("misbehave.py"), accounts={"a": {"config": config}})}, clock=InstantClock()
    )
    report = await StreamRouter(manager).deliver(DeliveryTarget("m", "a", "u"), events_of(_reply(4096)))
    assert report.ok, report.error
    await manager.close()
    err = capfd.readouterr().err
    assert "noise noise" in err, "the adapter's stderr is passed on"
    assert len(err) < 1 << 20, f"{len(err)} bytes of a 20 MB stderr flood reached ours"
    assert "adapter m/a stream wrote more to stderr than is passed on" in err


async def test_without_memfd_the_context_is_a_0600_file_in_a_directory_of_its_own_removed_after(
    tmp_path: Path, make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback where ``os.memfd_create`` does not exist (macOS, the BSDs)."""
    monkeypatch.delattr(os, "memfd_create")
    dump = tmp_path / "dump.json"
    config = {"fault": "record_env", "dump": str(dump)}
    state = tmp_path / "state"
    manager = make_manager(
        {"f": adapter(command=script_command("faulty.py"), accounts={"a": {"credential": "${T}", "config": config}})},
        env={**os.environ, "T": "fallback-credential-0001"},
        state_dir=state,
    )
    result = await manager.send(DeliveryTarget("f", "a", "x"), "hello")
    assert result.success, result.error
    seen = json.loads(dump.read_text())
    context = Path(seen["ctx_path"])
    assert context.name == "context.json" and context.parent.parent == state and seen["mode"] == 0o600
    assert seen["credential"] == {"kind": "token", "value": "fallback-credential-0001"}
    assert not context.parent.exists(), "the process's directory is removed when it is done"
    assert oct(state.stat().st_mode & 0o777) == oct(0o700)
