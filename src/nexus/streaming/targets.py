"""Delivery targets people name: ``NAME/ACCOUNT:TARGET`` on the CLI, ``{adapter, account, to}`` over HTTP.

One check for both (``nexus send --deliver`` and ``POST /v1/agents/{id}/messages`` with
``deliver``): the adapter must be configured, the account must be one of its accounts and
enabled. A bad target is refused before anything is queued, with one line that names the
field and what to do; the CLI turns it into exit code 2, the server into a 422.
"""

from __future__ import annotations

from collections.abc import Mapping

from nexus.adapters import DeliveryTarget
from nexus.config import AdapterConfig
from nexus.errors import ConfigError


class DeliveryTargetError(ConfigError):
    """A delivery target that cannot be used; ``field`` names the part that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def parse_target(spec: str) -> DeliveryTarget:
    """``NAME/ACCOUNT:TARGET`` (``TARGET`` may hold colons: ``tg/main:chat:12345``) → a target."""
    ref, sep, to = spec.partition(":")
    name, slash, account = ref.partition("/")
    if not sep or not slash or not name or not account or not to:
        raise DeliveryTargetError(
            "deliver", f"--deliver {spec!r}: expected NAME/ACCOUNT:TARGET, e.g. tg/main:chat:12345"
        )
    return DeliveryTarget(name, account, to)


def check_target(target: DeliveryTarget, adapters: Mapping[str, AdapterConfig], *, prefix: str = "") -> DeliveryTarget:
    """``target`` if its adapter is configured and its account exists and is enabled; else the reason.

    ``prefix`` goes before the field names in messages (``deliver.`` for the HTTP body).
    """
    adapter = adapters.get(target.channel)
    if adapter is None:
        known = ", ".join(sorted(adapters)) or "none: add one with nexus adapters register"
        raise DeliveryTargetError(
            f"{prefix}adapter", f"{prefix}adapter: no adapter named {target.channel!r} (configured: {known})"
        )
    account = adapter.accounts.get(target.account_id)
    if account is None:
        known = ", ".join(sorted(adapter.accounts)) or "none"
        raise DeliveryTargetError(
            f"{prefix}account",
            f"{prefix}account: adapter {target.channel!r} has no account {target.account_id!r} (accounts: {known}; "
            "see nexus adapters list)",
        )
    if not account.enabled:
        ref = f"{target.channel}/{target.account_id}"
        raise DeliveryTargetError(
            f"{prefix}account", f"{prefix}account: {ref} is disabled; enable it with nexus adapters enable {ref}"
        )
    if not target.to.strip():
        raise DeliveryTargetError(f"{prefix}to", f"{prefix}to: the target address is empty (e.g. chat:12345)")
    return target
