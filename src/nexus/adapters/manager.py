"""``AdapterManager``: the configured adapters, their processes, and the calls the router and CLI make.

One manager per process (the broker's, or a CLI command's). It resolves each adapter's
executable, hands every process it starts a fresh context of its own (account config and
credential, see :mod:`nexus.adapters.context`), caches
``info``, runs ``send`` with retries (3 attempts; an adapter's ``retry_after_ms`` is
honoured, otherwise 0.4 s x 2^n), keeps one supervised ``stream`` process per account, runs
``health``, and turns ``monitor`` lines into validated :class:`~nexus.adapters.events.NexusEvent`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nexus.adapters import _failures
from nexus.adapters._lines import read_line, worth_logging
from nexus.adapters.clock import Clock, MonotonicClock
from nexus.adapters.context import AdapterLaunch, context_payload, launch_with_context
from nexus.adapters.events import EventDeduper, NexusEvent, parse_event
from nexus.adapters.process import AdapterError, parse_json_output, run_command
from nexus.adapters.stream_client import StreamProcess
from nexus.adapters.stream_pool import DEFAULT_STREAM_PROCESSES, StreamPool
from nexus.adapters.supervisor import RestartPolicy, Supervisor
from nexus.adapters.types import AdapterInfo, DeliveryError, DeliveryResult, DeliveryTarget, HealthReport, ProtocolError
from nexus.config import AdapterAccount, AdapterConfig

log = logging.getLogger("nexus.adapters")

SEND_ATTEMPTS = 3
RETRY_BASE_S = 0.4
RETRY_CAP_S = 30.0


@dataclass(slots=True, frozen=True)
class HealthStatus:
    """One adapter account's health as ``nexus adapters health`` shows it."""

    adapter: str
    account: str
    ok: bool
    detail: str
    restarts: int = 0
    state: str = "idle"


def builtin_argv(name: str) -> list[str]:
    """The command line of a shipped adapter (run with this interpreter)."""
    return [sys.executable, "-m", f"nexus.adapters.builtin.{name}"]


def adapter_argv(config: AdapterConfig, home: Path | None = None) -> list[str]:
    """The executable and leading arguments of an adapter (a relative path is taken from ``home``)."""
    if config.builtin is not None:
        return builtin_argv(config.builtin)
    argv = shlex.split(config.command or "")
    if argv and "/" in argv[0] and not os.path.isabs(argv[0]) and home is not None:
        argv[0] = str((home / argv[0]).resolve())
    return argv


def stream_processes(config: AdapterConfig) -> int:
    """How many ``stream`` processes an account may run at once: ``stream_processes``, else 4 (``console``: 1,
    since its deliveries share one terminal and would interleave)."""
    if config.stream_processes is not None:
        return config.stream_processes
    return 1 if config.builtin == "console" else DEFAULT_STREAM_PROCESSES


class AdapterManager:
    """The adapters of one ``nexus.toml`` (``[adapters.<name>]``) and their running processes."""

    def __init__(
        self,
        adapters: Mapping[str, AdapterConfig],
        *,
        home: Path | None = None,
        env: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        policy: RestartPolicy | None = None,
        state_dir: Path | None = None,
    ) -> None:
        self.adapters = dict(adapters)
        self.home = home
        self.clock = clock or MonotonicClock()
        self.policy = policy or RestartPolicy()
        self._env = dict(os.environ if env is None else env)
        self._state_dir = state_dir  # where a context file goes where there is no memfd (not Linux)
        self._info: dict[str, AdapterInfo] = {}
        self._streams: dict[tuple[str, str], StreamPool] = {}
        self._info_lock = asyncio.Lock()
        self._monitors: list[Supervisor] = []
        self.refused = 0
        self._credentials_known = False

    def config(self, name: str) -> AdapterConfig:
        found = self.adapters.get(name)
        if found is None:
            known = ", ".join(sorted(self.adapters)) or "none"
            raise AdapterError(f"no adapter named {name!r} (configured: {known}); see `nexus adapters list`")
        return found

    def account(self, name: str, account_id: str) -> AdapterAccount:
        config = self.config(name)
        account = config.accounts.get(account_id)
        if account is None:
            return AdapterAccount()  # unknown accounts run without a credential (console, jsonl)
        if not account.enabled:
            raise AdapterError(f"{name}/{account_id} is disabled: `nexus adapters enable {name}/{account_id}`")
        return account

    # -- processes ---------------------------------------------------------------------------

    def _prepare(self, name: str, account_id: str | None) -> AdapterLaunch:
        """What one process of ``name`` starts with: the account's context (none for ``info``), a clean environment."""
        if not self._credentials_known:
            self._know_every_credential()
        if account_id is None:
            return launch_with_context(None, self._env)
        config = self.config(name)
        account = self.account(name, account_id)
        credential = None
        if account.credential is not None:
            from nexus.config import resolve_env
            from nexus.llm import add_secrets

            where = f"adapters.{name}.accounts.{account_id}.credential"
            credential = resolve_env(account.credential, self._env, where)
            add_secrets([credential])  # no error text, here or in a run, ever repeats it
        payload = context_payload(
            platform=config.platform or self._platform_guess(name),
            account_id=account_id,
            config=account.config,
            credential=credential,
            credential_kind=account.credential_kind,
        )
        return launch_with_context(payload, self._env, fallback_dir=self._state_dir)

    def _know_every_credential(self) -> None:
        """Register every account's credential as a secret before the first process starts.

        A process's environment is Nexus's own minus every secret Nexus knows: were an account's credential
        known only once its own process had started, the first adapter started would inherit the value of
        another account's ``${VAR}`` (a variable not named like a secret). An unset variable is skipped:
        there is nothing to hide, and that account's own start says what is missing.
        """
        from nexus.config import resolve_env
        from nexus.errors import ConfigError
        from nexus.llm import add_secrets

        self._credentials_known = True
        values = []
        for name, config in self.adapters.items():
            for account_id, account in config.accounts.items():
                if account.credential is not None:
                    where = f"adapters.{name}.accounts.{account_id}.credential"
                    with contextlib.suppress(ConfigError):
                        values.append(resolve_env(account.credential, self._env, where))
        add_secrets(values)

    def _platform_guess(self, name: str) -> str:
        info = self._info.get(name)
        config = self.adapters.get(name)
        if info is not None:
            return info.platform
        if config is not None and config.builtin is not None:
            return config.builtin
        return name

    async def run(
        self, name: str, args: list[str], *, account_id: str | None = None, timeout_s: float | None = None
    ) -> object:
        """Run one command of adapter ``name`` and return the JSON it printed."""
        config = self.config(name)
        launch = self._prepare(name, account_id)
        try:
            output = await run_command(
                [*adapter_argv(config, self.home), *args],
                env=launch.env,
                timeout_s=timeout_s or config.timeout_s,
                name=f"adapter {name}",
                pass_fds=launch.pass_fds,
            )
        finally:
            launch.release()
        return parse_json_output(output, name=f"adapter {name}", command=args[0])

    async def info(self, name: str, *, refresh: bool = False) -> AdapterInfo:
        """The adapter's ``info`` (cached for the life of the manager)."""
        async with self._info_lock:
            if refresh or name not in self._info:
                raw = await self.run(name, ["info"], timeout_s=min(10.0, self.config(name).timeout_s))
                try:
                    self._info[name] = AdapterInfo.from_json(raw)
                except ProtocolError as exc:
                    raise AdapterError(
                        f"adapter {name}: `info` answered something other than the protocol: {exc}"
                    ) from None
            return self._info[name]

    async def stream_process(self, name: str, account_id: str) -> StreamProcess:
        """The account's first long-running ``stream`` process (spawned by its first delivery)."""
        return (await self.stream_pool(name, account_id)).primary()

    async def stream_pool(self, name: str, account_id: str) -> StreamPool:
        """The account's ``stream`` processes (:mod:`nexus.adapters.stream_pool`): one delivery each at a time."""
        key = (name, account_id)
        pool = self._streams.get(key)
        if pool is None:
            self.account(name, account_id)  # refuses a disabled account before anything starts

            def make() -> StreamProcess:
                return StreamProcess(self._supervisor(name, account_id, "stream"))

            config = self.config(name)
            pool = StreamPool(make, stream_processes(config), idle_close_s=config.stream_idle_s)
            self._streams[key] = pool
        return pool

    def _supervisor(self, name: str, account_id: str, command: str) -> Supervisor:
        """A supervisor for one long-running ``stream`` or ``monitor`` process of the account (not started yet)."""
        argv = [*adapter_argv(self.config(name), self.home), command, "--account", account_id, "--format", "jsonl"]
        return Supervisor(
            f"adapter {name}/{account_id} {command}",
            argv,
            lambda: self._prepare(name, account_id),
            policy=self.policy,
            clock=self.clock,
            give_up=_failures.StreamGiveUp(self.home, name, account_id) if command == "stream" else None,
        )

    async def monitor(self, name: str, account_id: str) -> AsyncIterator[NexusEvent]:
        """The account's inbound events from its supervised ``monitor`` process, validated and deduplicated.

        A line that fails the ``NexusEvent`` schema is refused with the reason (logged, counted
        in :attr:`refused`), and nothing runs for it. The process is restarted with backoff when
        it exits; the iterator ends when the restarts are exhausted or :meth:`close` is called.
        """
        self.account(name, account_id)
        supervisor = self._supervisor(name, account_id, "monitor")
        self._monitors.append(supervisor)
        deduper = EventDeduper()
        while supervisor.state != "stopped":
            try:
                proc = await supervisor.ensure()
            except AdapterError as exc:
                log.error("%s", exc)
                if supervisor.state == "failed":  # for `nexus adapters health`, which runs in another process
                    _failures.record(self.home, name, account_id, str(exc))
                return
            if supervisor.starts == 1:  # tried again (a new start, or `enable`): an old give-up no longer holds
                _failures.clear_adapter_failure(self.home, name, account_id)
            assert proc.stdout is not None
            async for event in self._events(name, account_id, proc.stdout):
                if deduper.first_time(event.event_id):
                    yield event
            code = await proc.wait()
            supervisor.died(f"monitor exited with code {code}")

    async def _events(self, name: str, account_id: str, stdout: asyncio.StreamReader) -> AsyncIterator[NexusEvent]:
        while True:
            line = await read_line(stdout)
            if line is None:
                self._refuse(name, account_id, "a line longer than 1 MiB (skipped whole)")
                continue
            if not line:
                return
            if not line.strip():
                continue
            try:
                event = parse_event(line)
            except ProtocolError as exc:
                self._refuse(name, account_id, str(exc))
                continue
            if event.account_id != account_id:
                self._refuse(
                    name, account_id, f"event for account {event.account_id!r} from the monitor of {account_id!r}"
                )
                continue
            yield event

    def _refuse(self, name: str, account_id: str, reason: str) -> None:
        """Count a refused line; log the first five, then the 10th, 100th… (a flood logs a dozen lines)."""
        self.refused += 1
        if worth_logging(self.refused):
            log.warning("adapter %s/%s: monitor line refused (%d so far): %s", name, account_id, self.refused, reason)

    # -- send ----------------------------------------------------------------------------------

    async def send(self, target: DeliveryTarget, text: str, *, first: bool = True) -> DeliveryResult:
        """Deliver ``text`` with the adapter's ``send``: up to 3 attempts, ``retry_after_ms`` honoured.

        ``reply_to_id`` goes only with the first block of a delivery (``first``); ``thread_id``
        with all of them. Failures come back as a result (never raised), so a delivery can
        report them with the turn.
        """
        if "\x00" in text:  # no command line can carry a NUL (exec would refuse, or the text end there)
            text = text.replace("\x00", "\ufffd")
        args = ["send", "--account", target.account_id, "--to", target.to]
        if target.thread_id:
            args += ["--thread", target.thread_id]
        if first and target.reply_to_id:
            args += ["--reply-to", target.reply_to_id]
        args += ["--text", text]
        result = DeliveryResult(False, error=DeliveryError("unknown", "not attempted"))
        for attempt in range(SEND_ATTEMPTS):
            result = await self._send_once(target, args)
            result.attempts = attempt + 1
            error = result.error
            if result.success or error is None or not (error.retry or error.retry_after_ms is not None):
                return result
            if attempt + 1 < SEND_ATTEMPTS:
                delay = error.retry_after_ms / 1000 if error.retry_after_ms is not None else RETRY_BASE_S * 2**attempt
                await self.clock.sleep(min(RETRY_CAP_S, delay))
        return result

    async def _send_once(self, target: DeliveryTarget, args: list[str]) -> DeliveryResult:
        try:
            raw = await self.run(target.channel, args, account_id=target.account_id)
            return DeliveryResult.from_json(raw)
        except AdapterError as exc:
            return DeliveryResult(False, error=DeliveryError("unknown", str(exc), retry=False))
        except ProtocolError as exc:
            message = f"adapter {target.channel}: `send` printed a bad DeliveryResult: {exc}"
            return DeliveryResult(False, error=DeliveryError("unknown", message))

    # -- health --------------------------------------------------------------------------------

    async def health(self, name: str, account_id: str) -> HealthStatus:
        """Run the account's ``health`` (or ``info`` when the adapter has no ``health``); never raises.

        With several ``stream`` processes the restarts are summed over all of them and a failed one
        (say the third of four) makes the account unhealthy, naming which it is.
        """
        pool = self._streams.get((name, account_id))
        streams = list(pool.processes) if pool is not None else []
        restarts = sum(stream.supervisor.restarts for stream in streams)
        states = [stream.supervisor.state for stream in streams]
        state = next((s for s in ("failed", "backoff", "running") if s in states), states[0] if states else "idle")
        failed = next((i for i, stream in enumerate(streams) if stream.supervisor.state == "failed"), None)
        try:
            info = await self.info(name)
            gave_up = _failures.recorded(self.home).get(f"{name}/{account_id}") if failed is None else None
            if gave_up is not None:  # its monitor or stream gave up in another process (nexus serve, a drain)
                error = f"its {gave_up.get('process', 'monitor')} gave up: {gave_up.get('error')}"
                return HealthStatus(name, account_id, False, error, restarts, "failed")
            if failed is not None:
                error = streams[failed].supervisor.last_error or "failed"
                which = f"stream process {failed + 1} of {len(streams)}: " if len(streams) > 1 else ""
                return HealthStatus(name, account_id, False, which + error, restarts, state)
            if not info.can("health"):
                return HealthStatus(
                    name, account_id, True, f"{info.platform} {info.version} (no health command)", restarts, state
                )
            raw = await self.run(name, ["health", "--account", account_id], account_id=account_id, timeout_s=10.0)
            report = HealthReport.from_json(raw)
        except (AdapterError, ProtocolError) as exc:
            return HealthStatus(name, account_id, False, str(exc), restarts, state)
        except Exception as exc:  # e.g. a credential variable that is not set (ConfigError)
            return HealthStatus(name, account_id, False, str(exc), restarts, state)
        detail = "connected" if report.connected else f"not connected: {report.error or 'no reason given'}"
        return HealthStatus(name, account_id, report.connected, detail, restarts, state)

    def enabled_accounts(self) -> list[tuple[str, str]]:
        """Every ``(adapter, account)`` pair that is enabled in config."""
        return [
            (name, account_id)
            for name, config in sorted(self.adapters.items())
            for account_id, account in sorted(config.accounts.items())
            if account.enabled
        ]

    async def close(self) -> None:
        """Stop every process this manager started (SIGTERM, then SIGKILL after the grace period)."""
        pools = list(self._streams.values())
        monitors = list(self._monitors)
        self._streams.clear()
        self._monitors.clear()
        await asyncio.gather(
            *(pool.close() for pool in pools),
            *(monitor.stop() for monitor in monitors),
            return_exceptions=True,
        )

    def options(self, name: str) -> dict[str, Any]:
        """The block overrides of ``[adapters.<name>.blocks]`` (unset keys left out)."""
        return self.config(name).blocks.model_dump(exclude_none=True)
