"""Adapters that misbehave: each fault ends in one clear error, the caller is never crashed.

Real processes throughout: missing and non-executable files, garbage on stdout, a hang, a
non-zero exit, a flood, a stream process that dies mid-delivery, one that ignores SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

import pytest
from adapter_helpers import MakeManager, adapter, events_of, script_command

from nexus.adapters.process import AdapterError
from nexus.adapters.supervisor import RestartPolicy
from nexus.adapters.types import AdapterStreamStatus, DeliveryTarget, ProtocolError
from nexus.streaming.events import StreamEnd, Token
from nexus.streaming.router import StreamRouter
from nexus.testing import InstantClock, ManualClock


async def test_missing_executable_is_reported_by_health_and_delivery(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = make_manager({"gone": adapter(command=str(tmp_path / "no-such-adapter"), accounts={"a": {}})})
    health = await manager.health("gone", "a")
    assert not health.ok and "not found" in health.detail
    report = await StreamRouter(manager, clock=ManualClock()).deliver(
        DeliveryTarget("gone", "a", "x"), events_of([Token("hi")])
    )
    assert not report.ok and report.path == "none" and "not found" in (report.error or "")


async def test_a_file_that_is_not_executable_is_named(tmp_path: Path, make_manager: MakeManager) -> None:
    script = tmp_path / "adapter.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    manager = make_manager({"plain": adapter(command=str(script))})
    with pytest.raises(AdapterError, match="not executable: chmod"):
        await manager.info("plain")


async def test_garbage_from_info_is_a_clear_error(make_manager: MakeManager) -> None:
    manager = make_manager({"g": adapter(command=script_command("faulty.py", "garbage-info"))})
    with pytest.raises(AdapterError, match="did not print JSON"):
        await manager.info("g")


async def test_an_info_that_exits_non_zero_is_an_error_whatever_it_printed(make_manager: MakeManager) -> None:
    """A failed ``info`` registered the adapter (its JSON was taken as for ``send``): the docs say a non-zero exit
    is one clear error, and only a failed ``send`` (or ``health``) is still an answer."""
    manager = make_manager({"g": adapter(command=script_command("faulty.py", "exit-info"))})
    with pytest.raises(AdapterError, match="`info` exited with code 3"):
        await manager.info("g")


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("garbage", "did not print JSON"),
        ("hang", "no answer within 1 s"),
        ("exit", "exited with code 4: faulty: the platform refused the login"),
        ("flood", "flooding stdout"),
        ("long_id", "'message_ids' holds an id of 100000 characters; a message id is 1 to 512 characters"),
    ],
)
async def test_send_faults_become_failed_results(fault: str, message: str, make_manager: MakeManager) -> None:
    manager = make_manager(
        {"f": adapter(command=script_command("faulty.py"), timeout_s=1.0, accounts={"a": {"config": {"fault": fault}}})}
    )
    result = await manager.send(DeliveryTarget("f", "a", "x"), "hello")
    assert not result.success
    assert result.error is not None and message in result.error.message


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"type": "message_created", "messageId": "7" * 100_000}, "'messageId'"),
        ({"type": "delivery_complete", "messageIds": ["1", "7" * 513]}, "'messageIds'"),
        ({"type": "message_sent", "messageId": "", "final": True}, "'messageId'"),
    ],
)
def test_a_stream_status_line_with_an_overlong_message_id_is_refused(line: dict[str, object], field: str) -> None:
    with pytest.raises(ProtocolError, match=f"{field} holds an id of .* characters; a message id is 1 to 512"):
        AdapterStreamStatus.from_json(line)
    assert AdapterStreamStatus.from_json({"type": "message_created", "messageId": "7" * 512}).message_id == "7" * 512


async def test_retry_after_is_honoured_for_three_attempts(tmp_path: Path, make_manager: MakeManager) -> None:
    counter = tmp_path / "count"
    clock = InstantClock()
    config = {"fault": "rate_limited", "failures": 2, "counter": str(counter)}
    manager = make_manager(
        {"f": adapter(command=script_command("faulty.py"), accounts={"a": {"config": config}})}, clock=clock
    )
    result = await manager.send(DeliveryTarget("f", "a", "x"), "hello")
    assert result.success and result.message_ids == ["ok2"]
    assert clock.sleeps == [1.5, 1.5]
    assert counter.read_text() == "3"


async def test_send_gives_up_after_three_attempts(tmp_path: Path, make_manager: MakeManager) -> None:
    counter = tmp_path / "count"
    config = {"fault": "rate_limited", "failures": 10, "counter": str(counter)}
    manager = make_manager(
        {"f": adapter(command=script_command("faulty.py"), accounts={"a": {"config": config}})}, clock=InstantClock()
    )
    result = await manager.send(DeliveryTarget("f", "a", "x"), "hello")
    assert not result.success and result.error is not None and result.error.type == "rate_limited"
    assert counter.read_text() == "3"


async def test_a_nul_in_a_reply_or_a_target_is_a_result_not_a_crash(tmp_path: Path, make_manager: MakeManager) -> None:
    """``send`` passes the text on the command line, which cannot carry a NUL: Popen raised "embedded null byte"
    out of ``send`` (documented never to raise). The text's NUL goes as U+FFFD; a target holding one fails."""
    dump = tmp_path / "dump.json"
    config = {"fault": "record_env", "dump": str(dump)}
    manager = make_manager({"f": adapter(command=script_command("faulty.py"), accounts={"a": {"config": config}})})
    result = await manager.send(DeliveryTarget("f", "a", "x"), "nul\x00inside")
    assert result.success, result.error
    assert json.loads(dump.read_text())["argv"][-1] == "nul\ufffdinside"
    refused = await manager.send(DeliveryTarget("f", "a", "x\x00y"), "hello")
    assert not refused.success and refused.error is not None and "NUL" in refused.error.message


async def test_credentials_travel_in_a_0600_file_never_in_argv_or_env(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    dump = tmp_path / "dump.json"
    secret = "123456:very-secret-token"
    manager = make_manager(
        {
            "f": adapter(
                command=script_command("faulty.py"),
                accounts={"a": {"credential": "${BOT_TOKEN}", "config": {"fault": "record_env", "dump": str(dump)}}},
            )
        },
        env={**os.environ, "BOT_TOKEN": secret, "OPENAI_API_KEY": "sk-parent"},
    )
    result = await manager.send(DeliveryTarget("f", "a", "x"), "hello")
    assert result.success
    seen = json.loads(dump.read_text())
    assert seen["credential"] == {"kind": "token", "value": secret}
    assert seen["mode"] == 0o600
    assert secret not in " ".join(seen["argv"])
    assert all(secret not in value for value in seen["env"].values())
    assert "OPENAI_API_KEY" not in seen["env"] and "BOT_TOKEN" not in seen["env"]
    assert seen["ctx_path"].startswith("/dev/fd/"), "on Linux the context is a memory file that no directory lists"


async def test_malformed_status_lines_are_skipped(
    tmp_path: Path, make_manager: MakeManager, caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "lines.jsonl"
    config = {"record": str(record), "garbage": '{"type": "nonsense"} and more'}
    manager = make_manager({"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": config}})})
    with caplog.at_level(logging.WARNING, logger="nexus.adapters"):
        report = await StreamRouter(manager, clock=ManualClock()).deliver(
            DeliveryTarget("rec", "x", "u"), events_of([Token("a"), StreamEnd("r")])
        )
    assert report.ok and report.message_ids == ["m2"]
    process = await manager.stream_process("rec", "x")
    assert process.bad_lines == 2
    assert "skipped a malformed line" in caplog.text


async def test_a_stream_process_dying_mid_delivery_ends_it_partial_and_is_restarted(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    record = tmp_path / "lines.jsonl"
    clock = ManualClock()
    manager = make_manager(
        {
            "rec": adapter(
                command=script_command("recorder.py"),
                accounts={"x": {"config": {"record": str(record), "die_after": 3}}},
            )
        },
        clock=clock,
    )
    router = StreamRouter(manager, clock=clock)
    target = DeliveryTarget("rec", "x", "u")

    report = await router.deliver(target, events_of([Token("one "), Token("two "), Token("three"), StreamEnd("r")]))
    assert not report.ok and report.partial
    assert "exited with code 3" in (report.error or "")

    second = asyncio.create_task(router.deliver(target, events_of([Token("again"), StreamEnd("r2")])))
    await clock.wait_for_sleeper()
    assert clock.sleeps == [1.0], "the restart waits 1 s x 2^0"
    await clock.advance(1.0)
    await second
    process = await manager.stream_process("rec", "x")
    assert process.supervisor.restarts == 1 and process.supervisor.starts == 2


async def test_restarts_stop_after_five_with_exponential_backoff(tmp_path: Path, make_manager: MakeManager) -> None:
    record = tmp_path / "lines.jsonl"
    clock = InstantClock()
    manager = make_manager(
        {
            "rec": adapter(
                command=script_command("recorder.py"),
                accounts={"x": {"config": {"record": str(record), "die_after": 1}}},
            )
        },
        clock=clock,
    )
    router = StreamRouter(manager, clock=clock)
    target = DeliveryTarget("rec", "x", "u")
    reports = [await router.deliver(target, events_of([Token("t"), StreamEnd("r")])) for _ in range(7)]
    assert all(not r.ok for r in reports)
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert "gave up after 5 restarts" in (reports[-1].error or "")
    health = await manager.health("rec", "x")
    assert not health.ok and health.state == "failed"


def test_backoff_is_capped_at_300_seconds() -> None:
    policy = RestartPolicy()
    assert [policy.backoff(n) for n in range(10)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]


async def test_stop_sends_sigkill_when_sigterm_is_ignored(tmp_path: Path, make_manager: MakeManager) -> None:
    pid_file = tmp_path / "pid"
    manager = make_manager(
        {"s": adapter(command=script_command("stubborn.py"), accounts={"a": {"config": {"pid": str(pid_file)}}})},
        policy=RestartPolicy(stop_grace_s=0.3),
    )
    process = await manager.stream_process("s", "a")
    proc = await process.supervisor.ensure()
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    await manager.close()
    assert proc.returncode == -signal.SIGKILL


async def test_a_flood_of_bad_lines_is_skipped_without_stalling(tmp_path: Path, make_manager: MakeManager) -> None:
    record = tmp_path / "lines.jsonl"
    config = {"record": str(record), "garbage": "x" * 100, "garbage_repeat": 20_000}
    manager = make_manager({"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": config}})})
    report = await StreamRouter(manager, clock=ManualClock()).deliver(
        DeliveryTarget("rec", "x", "u"), events_of([Token("a"), StreamEnd("r")])
    )
    assert report.ok and report.message_ids == ["m2"]
    process = await manager.stream_process("rec", "x")
    assert process.bad_lines == 40_000


async def test_an_adapter_that_never_completes_is_timed_out_and_restarted(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    record = tmp_path / "lines.jsonl"
    clock = InstantClock()
    config = {"record": str(record), "silent": True}
    manager = make_manager(
        {"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": config}})}, clock=clock
    )
    router = StreamRouter(manager, clock=clock, finish_timeout_s=0.3)
    target = DeliveryTarget("rec", "x", "u")
    first = await router.deliver(target, events_of([Token("a"), StreamEnd("r")]))
    assert not first.ok and "no delivery_complete within 0.3 s" in (first.error or "")
    assert not first.partial and first.status == "failed", "a silent adapter never said the user saw anything"
    second = await router.deliver(target, events_of([Token("b"), StreamEnd("r")]))
    assert not second.ok
    process = await manager.stream_process("rec", "x")
    assert process.supervisor.starts == 2 and clock.sleeps == [1.0], "the hung process was replaced after its backoff"


async def test_a_long_flood_of_bad_lines_logs_a_handful_of_warnings(
    tmp_path: Path, make_manager: MakeManager, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood is logged on a power-of-ten schedule: 200,000 bad lines must not mean 200 warnings on stderr."""
    config = {"record": str(tmp_path / "lines.jsonl"), "garbage": "x" * 20, "garbage_repeat": 100_000}
    manager = make_manager({"rec": adapter(command=script_command("recorder.py"), accounts={"x": {"config": config}})})
    with caplog.at_level(logging.WARNING, logger="nexus.adapters"):
        report = await StreamRouter(manager, clock=ManualClock()).deliver(
            DeliveryTarget("rec", "x", "u"), events_of([Token("a"), StreamEnd("r")])
        )
    assert report.ok
    process = await manager.stream_process("rec", "x")
    assert process.bad_lines == 200_000
    warnings = [r for r in caplog.records if "skipped a malformed line" in r.getMessage()]
    assert 5 < len(warnings) <= 12, len(warnings)


async def test_a_stream_that_gave_up_starts_again_once_enabled_without_a_restart_of_the_server(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    """The give-up lived in the server's memory only: after the fix and ``nexus adapters enable`` (what the give-up
    line says to do) every delivery still failed "gave up" until ``nexus serve`` restarted, and ``nexus adapters
    health`` in another shell said ``ok`` (an outside trial)."""
    from adapter_helpers import SCRIPTS

    from nexus.adapters import AdapterManager, clear_adapter_failure

    record, broken, script = tmp_path / "lines.jsonl", tmp_path / "broken", tmp_path / "adapter.py"
    broken.touch()
    script.write_text(  # the stream process exits at once while ``broken`` exists; otherwise the recorder
        f"import os, runpy, sys\nif sys.argv[1] == 'stream' and os.path.exists({str(broken)!r}):\n    sys.exit(3)\n"
        f"runpy.run_path({str(SCRIPTS / 'recorder.py')!r}, run_name='__main__')\n"
    )
    account = {"x": {"config": {"record": str(record)}}}
    configs = {"rec": adapter(command=f"{sys.executable} {script}", accounts=account)}
    clock = InstantClock()
    manager = make_manager(configs, clock=clock, home=tmp_path, policy=RestartPolicy(max_restarts=2, stop_grace_s=1.0))
    router = StreamRouter(manager, clock=clock)
    target = DeliveryTarget("rec", "x", "u")

    async def deliver(text: str) -> str | None:
        report = await router.deliver(target, events_of([Token(text), StreamEnd("r")]))
        return None if report.ok else report.error or "failed"

    errors = [await deliver(f"try {n}") for n in range(4)]
    assert "gave up after 2 restarts" in (errors[-1] or ""), errors
    elsewhere = AdapterManager(configs, home=tmp_path)  # `nexus adapters health` in another shell
    try:
        status = await elsewhere.health("rec", "x")
        assert not status.ok and status.detail.startswith("its stream gave up: adapter rec/x stream: gave up"), status
    finally:
        await elsewhere.close()
    broken.unlink()  # the fix
    assert "gave up" in (await deliver("fixed, not enabled yet") or "")
    clear_adapter_failure(tmp_path, "rec", "x")  # what `nexus adapters enable rec/x` does, from another shell
    assert await deliver("after enable") is None
    assert "after enable" in record.read_text()


def test_clear_adapter_failure_forgets_a_give_up_and_the_old_name_still_works(tmp_path: Path) -> None:
    """The function was named for monitors (``clear_monitor_failure``) after it cleared a stream's give-up too."""
    from nexus.adapters import clear_adapter_failure, clear_monitor_failure
    from nexus.adapters._failures import record, recorded

    record(tmp_path, "tg", "main", "the stream crashed", process="stream")
    record(tmp_path, "tg", "other", "the monitor crashed")
    clear_adapter_failure(tmp_path, "tg", "main")
    assert list(recorded(tmp_path)) == ["tg/other"]
    with pytest.warns(DeprecationWarning, match="use clear_adapter_failure"):
        clear_monitor_failure(tmp_path, "tg", "other")  # deprecated, still works
    assert recorded(tmp_path) == {}
