"""``nexus adapters``: register, list, enable, disable, health and test adapters.

``register``, ``enable`` and ``disable`` edit ``nexus.toml`` in place with tomlkit (comments
and layout kept), validate the result with the same strict loader as every command, and
write it atomically; a change that would make the file invalid is refused and nothing is
written. Secrets are never taken on the command line: ``--credential-env VAR`` stores
``${VAR}``, resolved when the adapter starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nexus.cli._config_edit import edit, first_problem, load
from nexus.cli._config_edit import table as toml_table
from nexus.cli._input import printable
from nexus.errors import ConfigError, NexusError, UsageError

if TYPE_CHECKING:
    from nexus.adapters import DeliveryTarget


def adapters_command(args: argparse.Namespace) -> int:
    """Dispatch ``nexus adapters ACTION``."""
    action = {
        "register": _register,
        "list": _list,
        "enable": _enable,
        "disable": _disable,
        "health": _health,
        "test": _test,
    }[args.action]
    return action(args)


# -- config file ---------------------------------------------------------------------------------


def _ref(ref: str) -> tuple[str, str]:
    name, sep, account = ref.partition("/")
    if not sep or not name or not account:
        raise UsageError(f"expected NAME/ACCOUNT (e.g. tg/main), got {ref!r}")
    return name, account


NAME_LIMIT = 64


def _check_name(what: str, name: str) -> None:
    """An adapter's name or an account's id must be addressable as ``NAME/ACCOUNT:TARGET`` (UsageError if not).

    ``/`` and ``:`` split a delivery target, so a name holding one registers something nothing can
    address (``../x``) or a target that reads two ways (``a:b``); spaces and control characters
    would be printed, and handed to the adapter on its command line, as they are.
    """
    bad = next((c for c in name if c in "/:" or c.isspace() or not c.isprintable()), None)
    if bad is not None or not name or len(name) > NAME_LIMIT:
        why = f"it holds {bad!r}" if bad is not None else f"give 1 to {NAME_LIMIT} characters"
        raise UsageError(
            f"{what} {printable(repr(name))} cannot be used: {why}; a name is 1 to {NAME_LIMIT} characters "
            "without '/', ':', spaces or control characters (e.g. tg, main)"
        )


def _manager(config: Any) -> Any:
    from nexus.adapters import AdapterManager

    return AdapterManager(config.adapters, home=config.home)


# -- actions -------------------------------------------------------------------------------------


def _register(args: argparse.Namespace) -> int:
    from nexus.config import AdapterConfig

    _check_name("adapter name", args.name)
    fields: dict[str, Any] = {"builtin": args.builtin} if args.builtin else {"command": args.command}
    if args.mode:
        fields["mode"] = args.mode
    try:
        candidate = AdapterConfig.model_validate(fields)
    except ValueError as exc:  # the record's own checks (an unbalanced quote in --command): a traceback before
        raise UsageError(first_problem(exc, key_prefix="--")) from None
    config = load(args)
    info = asyncio.run(_info_of(config.home, args.name, candidate))

    def change(document: Any) -> None:
        adapters = toml_table(document, "adapters")
        existing = adapters.get(args.name)
        table = existing if existing is not None else toml_table(adapters, args.name)
        for key in ("command", "builtin"):
            if key in table:
                del table[key]
        for key, value in fields.items():
            table[key] = value

    path = edit(args, change)
    shown = f"{info.platform} {info.version}, supports {', '.join(info.supports)}"  # the adapter's own words
    print(f"registered {args.name}: {printable(shown)} ({path})")
    print(f"next: nexus adapters enable {args.name}/<account>")
    return 0


async def _info_of(home: Path, name: str, candidate: Any) -> Any:
    from nexus.adapters import AdapterManager

    manager = AdapterManager({name: candidate}, home=home)
    try:
        return await manager.info(name)
    finally:
        await manager.close()


def _enable(args: argparse.Namespace) -> int:
    name, account = _ref(args.ref)
    _check_name("account", account)
    config = load(args)
    if name not in config.adapters:
        raise ConfigError(f"no adapter named {name!r}: `nexus adapters register {name} --command ...` first")
    values = dict(_parse_set(item) for item in args.set)

    def change(document: Any) -> None:
        table = toml_table(toml_table(document["adapters"][name], "accounts"), account)
        table["enabled"] = True
        if args.monitor:
            table["monitor"] = True
        if args.agent:
            table["agent"] = args.agent
        if args.credential_env:
            table["credential"] = "${" + args.credential_env + "}"
        if values:
            settings = toml_table(table, "config")
            for key, value in values.items():
                settings[key] = value

    edit(args, change)
    from nexus.adapters import clear_adapter_failure

    clear_adapter_failure(config.home, name, account)  # "fix the adapter, then enable it again" (the give-up line)
    extra = " with its monitor" if args.monitor else ""
    print(f"enabled {name}/{account}{extra}")
    if args.credential_env and not os.environ.get(args.credential_env):
        print(
            f"nexus: warning: {args.credential_env} is not set in this shell: export it where `nexus serve` or "
            f"`nexus adapters monitor` starts, or {name}/{account} runs without its credential "
            "(`nexus doctor` checks it)",
            file=sys.stderr,
        )
    return 0


def _parse_set(item: str) -> tuple[str, str | int | float | bool]:
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
    value: str | int | float | bool = raw
    if raw in ("true", "false"):
        value = raw == "true"
    elif _INTEGER.fullmatch(raw):
        value = int(raw)
    elif _DECIMAL.fullmatch(raw):
        value = float(raw)  # int() and float() also took nan, inf, 1_000, 1e3 and +5: those stay strings
    return key.strip(), value


_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+")


def _disable(args: argparse.Namespace) -> int:
    name, account = _ref(args.ref)
    config = load(args)
    adapter = config.adapters.get(name)
    if adapter is None or account not in adapter.accounts:
        raise ConfigError(f"no account {name}/{account} in nexus.toml; see `nexus adapters list`")

    def change(document: Any) -> None:
        document["adapters"][name]["accounts"][account]["enabled"] = False

    edit(args, change)
    print(f"disabled {name}/{account}")
    return 0


def _list(args: argparse.Namespace) -> int:
    config = load(args)
    infos = asyncio.run(_all_info(config))
    rows = []
    for name, adapter in sorted(config.adapters.items()):
        info = infos.get(name)
        rows.append(
            {
                "name": name,
                "command": adapter.command or f"builtin:{adapter.builtin}",
                "mode": adapter.mode,
                "supports": list(info.supports) if not isinstance(info, str) and info else [],
                "error": info if isinstance(info, str) else None,
                "accounts": {
                    acc: {"enabled": a.enabled, "monitor": a.monitor, "agent": a.agent}
                    for acc, a in adapter.accounts.items()
                },
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no adapters registered; try: nexus adapters register console --builtin console")
        return 0
    for row in rows:
        caps = ", ".join(row["supports"]) if not row["error"] else f"error: {row['error']}"
        print(printable(f"{row['name']}  ({row['command']}, mode {row['mode']})  {caps}"))
        for acc, state in row["accounts"].items():
            flags = [
                "enabled" if state["enabled"] else "disabled",
                *(["monitor"] if state["monitor"] else []),
                *([f"agent {state['agent']}"] if state["agent"] else []),
            ]
            print(printable(f"  {row['name']}/{acc}: {', '.join(flags)}"))
    return 0


async def _all_info(config: Any) -> dict[str, Any]:
    manager = _manager(config)
    out: dict[str, Any] = {}
    try:
        for name in config.adapters:
            try:
                out[name] = await manager.info(name)
            except NexusError as exc:
                out[name] = str(exc)
    finally:
        await manager.close()
    return out


def _health(args: argparse.Namespace) -> int:
    config = load(args)
    statuses = asyncio.run(_all_health(config))
    if args.json:
        print(
            json.dumps([{"adapter": s.adapter, "account": s.account, "ok": s.ok, "detail": s.detail} for s in statuses])
        )
    elif not statuses:
        print("no enabled adapter accounts; see `nexus adapters enable`")
    for status in [] if args.json else statuses:
        print(printable(f"{'ok  ' if status.ok else 'FAIL'}  {status.adapter}/{status.account}: {status.detail}"))
    return 0 if all(s.ok for s in statuses) else 1


async def _all_health(config: Any) -> list[Any]:
    manager = _manager(config)
    try:
        return list(await asyncio.gather(*(manager.health(n, a) for n, a in manager.enabled_accounts())))
    finally:
        await manager.close()


def _test(args: argparse.Namespace) -> int:
    name, account = _ref(args.ref)
    config = load(args)
    from nexus.adapters import DeliveryTarget
    from nexus.streaming import check_target

    # the check `nexus send --deliver` makes: an unknown or disabled account starts nothing (exit 2)
    target = check_target(
        DeliveryTarget(name, account, args.to, thread_id=args.thread, reply_to_id=args.reply_to), config.adapters
    )
    import logging

    logging.getLogger("nexus.streaming").addHandler(logging.NullHandler())  # the error is printed below
    report = asyncio.run(_deliver(config, target, args.text))
    if report.ok:
        ids = ", ".join(report.message_ids) or "none reported"
        print(printable(f"delivered to {name}/{account}:{args.to} ({report.path}); message ids: {ids}"))
        return 0
    print(printable(f"nexus: error: delivery to {name}/{account}:{args.to} failed: {report.error}"), file=sys.stderr)
    return 1


async def _deliver(config: Any, target: DeliveryTarget, text: str) -> Any:
    from nexus.streaming import StreamEnd, StreamRouter, Token

    async def events() -> Any:
        yield Token(text)
        yield StreamEnd("cli-test", final=True)

    manager = _manager(config)
    try:
        return await StreamRouter(manager).deliver(target, events(), run_id="cli-test", session_label="cli")
    finally:
        await manager.close()
