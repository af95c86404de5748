"""``[adapters.<name>]`` in ``nexus.toml``: adapter executables, their accounts and block settings.

Strict like the rest of the file (unknown keys and wrong types are errors)::

    [adapters.tg]
    builtin = "telegram"          # or: command = "/usr/local/bin/my-adapter --verbose"
    mode = "auto"                 # auto: stream if the adapter can, else blocks; or native / blocks

    [adapters.tg.blocks]          # block pipeline overrides (see docs/streaming.md)
    min_chars = 600
    human_delay_ms = [0, 0]

    [adapters.tg.accounts.main]
    credential = "${TELEGRAM_BOT_TOKEN}"
    monitor = true
    agent = "assistant"
    config = { api_base = "http://127.0.0.1:8081" }
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from nexus.config._record import Record, field_check, record_check, setting

BUILTIN_ADAPTERS: tuple[str, ...] = ("console", "jsonl", "telegram")
"""The adapters shipped with Nexus (``builtin = "<name>"``)."""


class AdapterBlocks(Record):
    """Block pipeline overrides for one adapter; unset keys keep the channel defaults."""

    min_chars: int | None = setting(default=None, gt=0)
    max_chars: int | None = setting(default=None, ge=16)
    idle_ms: int | None = setting(default=None, ge=0)
    human_delay_ms: list[int] | None = None
    tool_status: Literal["inline", "off"] | None = None

    @field_check("human_delay_ms")
    def _range(value: list[int] | None) -> list[int] | None:
        if value is not None and (len(value) != 2 or min(value) < 0 or value[0] > value[1]):
            raise ValueError("expected [min_ms, max_ms] with 0 <= min_ms <= max_ms (e.g. [800, 2500]; [0, 0] = off)")
        return value


class AdapterAccount(Record):
    """One account of an adapter (a bot token, a phone number...)."""

    enabled: bool = True
    monitor: bool = False
    agent: str | None = None
    credential: str | None = None
    credential_kind: str = "token"
    config: dict[str, str | int | float | bool] = setting(default_factory=dict)


class AdapterConfig(Record):
    """One adapter: the executable (``command``, or ``builtin``), routing mode, block settings, accounts."""

    command: str | None = None
    builtin: Literal["console", "jsonl", "telegram"] | None = None
    platform: str | None = None
    mode: Literal["auto", "native", "blocks"] = "auto"
    reasoning: bool = False
    timeout_s: float = setting(default=30.0, gt=0)
    stream_processes: int | None = setting(default=None, ge=1, le=32)
    """``stream`` processes per account at once (one delivery each): default 4 (the ``console`` builtin: 1)."""
    stream_idle_s: float = setting(default=300.0, ge=0)
    """An extra ``stream`` process (not the account's first) idle this long is stopped; 0 keeps them running."""
    blocks: AdapterBlocks = setting(default_factory=AdapterBlocks)
    accounts: dict[str, AdapterAccount] = setting(default_factory=dict)

    @field_check("command")
    def _command_line(value: str | None) -> str | None:
        """Split as the manager will run it (``shlex``): an unbalanced quote was a traceback from every command
        that started the adapter, and ``nexus doctor`` said nothing."""
        if value is not None:
            import shlex

            try:
                shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"is not a command line ({exc}): check its quotes") from None
        return value

    @record_check
    def _one_executable(self) -> None:
        if (self.command is None) == (self.builtin is None):
            raise ValueError(f'give exactly one of command = "..." or builtin = one of {", ".join(BUILTIN_ADAPTERS)}')
        if self.command is not None and not self.command.strip():
            raise ValueError("command is empty")


def credential_problems(
    adapters: Mapping[str, AdapterConfig], env: Mapping[str, str], *, monitored_only: bool = False
) -> list[str]:
    """One line per enabled account (``monitored_only``: per monitored one) whose ``credential`` names a
    variable that is not set: the adapter would start without its token and fail (only its ``health``
    said so). Checked by ``nexus doctor``, ``nexus adapters enable --credential-env`` and ``monitor``."""
    from nexus.config._env import missing_env

    problems: list[str] = []
    for name, adapter in sorted(adapters.items()):
        for account_id, account in sorted(adapter.accounts.items()):
            if not account.enabled or account.credential is None or (monitored_only and not account.monitor):
                continue
            missing = missing_env(account.credential, env)
            if missing:
                problems.append(
                    f"{name}/{account_id}: its credential {account.credential} needs {', '.join(missing)}, which is "
                    f"not set: export {missing[0]}=… in the shell that starts nexus"
                )
    return problems
